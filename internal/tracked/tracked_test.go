package tracked

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The repository tracks no build output and no large file.
func TestRepository(t *testing.T) {
	module := moduleRoot(t)
	root, files, err := Files(module)
	if errors.Is(err, ErrNotGit) {
		t.Skipf("skipped: %v (the source is not a git checkout, so there are no tracked files to check)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !sameDir(root, module) {
		t.Skipf("skipped: the module at %s is not a git checkout of its own (git's work tree is %s)", module, root)
	}
	if len(files) < 100 {
		t.Fatalf("git ls-files listed %d files: want the repository's", len(files))
	}
	problems, err := Check(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s (git rm --cached it, and add a .gitignore entry if a build writes it there)", p)
	}
}

// Each rule, on a work tree made for the test: large files, executables of
// each format, a module without its source; text, a module beside its .wat
// and an allowed file pass.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	pe := make([]byte, 0x100)
	copy(pe, "MZ")
	binary.LittleEndian.PutUint32(pe[0x3c:], 0x80)
	copy(pe[0x80:], "PE\x00\x00")
	mzText := []byte("MZ is how this note starts, and it is text\n" + strings.Repeat(".", 100))
	files := map[string][]byte{
		"README.md":            []byte("# text\n"),
		"big.json":             make([]byte, MaxSize+1),
		"just-under.json":      make([]byte, MaxSize),
		"tmpimp":               append([]byte("\x7fELF\x02\x01\x01"), make([]byte, 64)...),
		"bin/tool":             []byte("\xcf\xfa\xed\xfe\x07\x00\x00\x01"),
		"fat":                  []byte("\xca\xfe\xba\xbe\x00\x00\x00\x02"),
		"tool.exe":             pe,
		"mz.txt":               mzText,
		"policy.wasm":          []byte("\x00asm\x01\x00\x00\x00"),
		"renamed.bin":          []byte("\x00asm\x01\x00\x00\x00"),
		"testdata/good.wasm":   []byte("\x00asm\x01\x00\x00\x00"),
		"testdata/good.wat":    []byte("(module)\n"),
		"testdata/orphan.wasm": []byte("\x00asm\x01\x00\x00\x00"),
		"script.sh":            []byte("#!/bin/sh\necho hi\n"),
		"empty":                nil,
	}
	var list []string
	for name, b := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		list = append(list, name)
	}
	list = append(list, "deleted-in-work-tree")
	want := map[string]string{
		"big.json":             "1048577 bytes, more than the 1048576",
		"tmpimp":               "ELF",
		"bin/tool":             "Mach-O",
		"fat":                  "Mach-O universal",
		"tool.exe":             "PE",
		"policy.wasm":          "without its .wat source",
		"renamed.bin":          "without its .wat source",
		"testdata/orphan.wasm": "without its .wat source",
	}
	check := func(t *testing.T, want map[string]string) {
		t.Helper()
		problems, err := Check(dir, list)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, p := range problems {
			got[p.Path] = p.Reason
		}
		for path, reason := range want {
			if !strings.Contains(got[path], reason) {
				t.Errorf("%s: problem %q, want one containing %q", path, got[path], reason)
			}
		}
		for path, reason := range got {
			if _, ok := want[path]; !ok {
				t.Errorf("%s: unexpected problem %q", path, reason)
			}
		}
	}
	check(t, want)

	t.Run("allowed", func(t *testing.T) {
		allowed["big.json"] = "a test's reason"
		defer delete(allowed, "big.json")
		delete(want, "big.json")
		check(t, want)
	})
}

// Files lists what git tracks, from any directory of the work tree, and
// says when there is no work tree; a large file added to the index fails
// the check.
func TestFilesInAGitRepository(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	if _, _, err := Files(dir); !errors.Is(err, ErrNotGit) {
		t.Fatalf("Files outside a work tree: %v, want ErrNotGit", err)
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, size := range map[string]int{"small.txt": 10, "sub/huge.dat": MaxSize + 1, "untracked.dat": MaxSize + 1} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("add", "small.txt", "sub/huge.dat")
	root, files, err := Files(filepath.Join(dir, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	if !sameDir(root, dir) || strings.Join(files, ",") != "small.txt,sub/huge.dat" {
		t.Fatalf("Files = %s, %q; want %s and the two files added", root, files, dir)
	}
	problems, err := Check(root, files)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || problems[0].Path != "sub/huge.dat" {
		t.Fatalf("problems %v, want sub/huge.dat only", problems)
	}
}

// moduleRoot is the directory holding this module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

func sameDir(a, b string) bool {
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	return errA == nil && errB == nil && ra == rb
}
