// Package tracked says which files may be committed: no build outputs
// (executables, compiled modules that no source beside them explains) and
// nothing large, outside a short allow-list. Its test runs the rules on the
// repository's tracked files (git ls-files) in `make test`, since a 75 MB
// binary was once committed by mistake.
//
// It reads files; it must never change the repository or depend on
// anything but git and the standard library.
package tracked

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// MaxSize is the largest file that may be tracked: the biggest source file
// is under 200 KB (generated protobuf code), and a policy module or test
// fixture that needs more is a build output or belongs elsewhere.
const MaxSize = 1 << 20

// allowed lists tracked files the rules would refuse, each with the reason
// it is there. Keep it short: prefer building the file in the test, or
// writing it as text (the .wat beside a .wasm).
var allowed = map[string]string{}

// A Problem is a tracked file that should not be.
type Problem struct {
	Path   string
	Reason string
}

func (p Problem) String() string { return p.Path + ": " + p.Reason }

// Check applies the rules to files (slash-separated paths relative to
// root, as git ls-files prints them) and returns the problems, in the
// order of files. A file that is not there (deleted in the work tree) or
// not a regular file (a symbolic link) is not checked. A compiled
// WebAssembly module is allowed when its .wat source is among files: the
// hand-written test fixtures (host/engine/testdata, host/interrupt/testdata)
// are kept as wat2wasm's output beside their source, which a test compares.
func Check(root string, files []string) ([]Problem, error) {
	listed := make(map[string]bool, len(files))
	for _, f := range files {
		listed[f] = true
	}
	var problems []Problem
	for _, f := range files {
		if _, ok := allowed[f]; ok {
			continue
		}
		info, err := os.Lstat(filepath.Join(root, filepath.FromSlash(f)))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !info.Mode().IsRegular() {
			continue
		}
		if info.Size() > MaxSize {
			problems = append(problems, Problem{f, fmt.Sprintf("%d bytes, more than the %d a tracked file may have", info.Size(), MaxSize)})
			continue
		}
		head, err := readHead(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		kind := binaryKind(head)
		switch {
		case kind == "":
		case kind == "a WebAssembly module" && strings.HasSuffix(f, ".wasm") && listed[strings.TrimSuffix(f, ".wasm")+".wat"]:
		case kind == "a WebAssembly module":
			problems = append(problems, Problem{f, "a WebAssembly module without its .wat source beside it: a build output"})
		default:
			problems = append(problems, Problem{f, kind + ": a build output"})
		}
	}
	return problems, nil
}

// headSize covers every signature binaryKind looks for, a PE header's
// usual offset included.
const headSize = 4096

func readHead(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, headSize)
	n, err := io.ReadFull(f, b)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	}
	return b[:n], err
}

// binaryKind names the executable or module format head starts with, ""
// for none.
func binaryKind(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte("\x7fELF")):
		return "an ELF executable or object"
	case bytes.HasPrefix(head, []byte("\xfe\xed\xfa\xce")), bytes.HasPrefix(head, []byte("\xfe\xed\xfa\xcf")),
		bytes.HasPrefix(head, []byte("\xce\xfa\xed\xfe")), bytes.HasPrefix(head, []byte("\xcf\xfa\xed\xfe")):
		return "a Mach-O executable or object"
	case bytes.HasPrefix(head, []byte("\xca\xfe\xba\xbe")):
		return "a Mach-O universal binary (or Java class)"
	case isPE(head):
		return "a PE (Windows) executable"
	case bytes.HasPrefix(head, []byte("\x00asm")):
		return "a WebAssembly module"
	}
	return ""
}

// isPE: an MZ header whose e_lfanew (at 0x3c) points at "PE\0\0".
func isPE(head []byte) bool {
	if !bytes.HasPrefix(head, []byte("MZ")) || len(head) < 0x40 {
		return false
	}
	off := int64(binary.LittleEndian.Uint32(head[0x3c:]))
	return off+4 <= int64(len(head)) && bytes.Equal(head[off:off+4], []byte("PE\x00\x00"))
}

// ErrNotGit is returned by Files outside a git work tree.
var ErrNotGit = errors.New("not a git work tree")

// Files returns the top directory of the git work tree holding dir and the
// files its index tracks (git ls-files), relative to that directory; or
// ErrNotGit when dir is in no work tree or git is missing.
func Files(dir string) (root string, files []string, err error) {
	if _, err := exec.LookPath("git"); err != nil {
		return "", nil, fmt.Errorf("%w: %v", ErrNotGit, err)
	}
	top, err := exec.Command("git", "-C", dir, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", nil, fmt.Errorf("%w: %s", ErrNotGit, dir)
	}
	root = strings.TrimSpace(string(top))
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		return "", nil, fmt.Errorf("git ls-files: %w", err)
	}
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return root, files, nil
}
