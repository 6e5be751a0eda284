package testwasm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TinyGo builds. `make tinygo` installs the toolchain into
// <repo>/.bin/tinygo (bin/tinygo plus the TINYGOROOT beside it, found from
// the binary's path); $WASMSCHED_TINYGO names another tinygo binary, or is
// "off" (CI's make test: the TinyGo builds are tested later, by make
// tinygo-tests). When the toolchain is absent or off, a test asking for a
// TinyGo build is skipped, unless $WASMSCHED_REQUIRE_TINYGO is 1 (`make
// test-tinygo` sets it), in which case it fails.
const (
	// EnvTinyGo overrides the tinygo binary; TinyGoOff turns TinyGo
	// builds off.
	EnvTinyGo = "WASMSCHED_TINYGO"
	TinyGoOff = "off"
	// EnvRequireTinyGo, set to 1, turns a missing toolchain from a skip
	// into a failure.
	EnvRequireTinyGo = "WASMSCHED_REQUIRE_TINYGO"
	// EnvTinyGoModules names a folder of modules already built by `make
	// examples-tinygo` (<name>.tinygo.wasm): TinyGoPath returns those for
	// examples/<name> instead of building, so `make test-tinygo` tests the
	// very files it built. The caller vouches that they are current.
	EnvTinyGoModules = "WASMSCHED_TINYGO_MODULES"
)

// TinyGoTarget is the target description every TinyGo build uses, relative
// to the repository root: TinyGo's wasip1 target on Debian's wasi-libc and
// clang builtins, with the scheduler off (see tools/tinygo/README.md).
const TinyGoTarget = "tools/tinygo/wasip1.json"

// TinyGoFlags are the flags of every TinyGo build, after -target; the
// Makefile's TINYGO_FLAGS must stay the same.
var TinyGoFlags = []string{"-buildmode=c-shared", "-no-debug"}

var tinygoBuilt = map[string]string{}

// TinyGo returns the tinygo binary, skipping tb (or failing it, under
// $WASMSCHED_REQUIRE_TINYGO=1) when the toolchain is not installed.
func TinyGo(tb testing.TB) string {
	tb.Helper()
	bin := tinygoBin(tb)
	if bin == TinyGoOff {
		if os.Getenv(EnvRequireTinyGo) == "1" {
			tb.Fatalf("%s=%s and %s=1: TinyGo builds cannot be both off and required", EnvTinyGo, TinyGoOff, EnvRequireTinyGo)
		}
		tb.Skipf("TinyGo builds are off here (%s=%s)", EnvTinyGo, TinyGoOff)
	}
	if !executable(bin) {
		if os.Getenv(EnvRequireTinyGo) == "1" {
			tb.Fatalf("TinyGo toolchain missing at %s and %s=1: run `make tinygo`", bin, EnvRequireTinyGo)
		}
		tb.Skipf("TinyGo toolchain missing at %s: run `make tinygo` to test the TinyGo build", bin)
	}
	return bin
}

// TinyGoWanted reports whether a caller that can leave TinyGo out (a
// benchmark's TinyGo profile or sub-benchmark) should include it: when the
// toolchain is installed and builds are not off, and always when TinyGo is
// required ($WASMSCHED_REQUIRE_TINYGO=1), so that TinyGo fails on what is
// wrong instead of the caller leaving TinyGo out unsaid.
func TinyGoWanted(tb testing.TB) bool {
	if os.Getenv(EnvRequireTinyGo) == "1" {
		return true
	}
	bin := tinygoBin(tb)
	return bin != TinyGoOff && executable(bin)
}

// tinygoBin is $WASMSCHED_TINYGO (a binary or TinyGoOff), or the binary
// `make tinygo` installs.
func tinygoBin(tb testing.TB) string {
	if bin := os.Getenv(EnvTinyGo); bin != "" {
		return bin
	}
	return filepath.Join(Root(tb), ".bin", "tinygo", "bin", "tinygo")
}

// executable reports whether path is a file someone may execute.
func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// TinyGoPath builds the Go package at pkg (relative to the repository
// root, for example "examples/gpu") with TinyGo, as `make examples-tinygo`
// does, and returns the path of the .wasm file. It skips or fails tb as
// TinyGo does when the toolchain is absent.
//
// A TinyGo build takes tens of seconds, so results are kept on disk, keyed
// by the toolchain, the flags and the sources of every package the module
// is built from: test processes of other packages reuse them.
func TinyGoPath(tb testing.TB, pkg string) string {
	tb.Helper()
	// Before the toolchain: modules already built need none.
	if p, ok := known(tb, tinygoBuilt, EnvTinyGoModules, pkg, ".tinygo.wasm"); ok {
		return p
	}
	bin := TinyGo(tb)
	mu.Lock()
	defer mu.Unlock()
	root := Root(tb)
	dir := cacheDir(tb, root)
	key, err := tinygoKey(root, bin, pkg)
	if err != nil {
		tb.Fatalf("tinygo build of %s: %v", pkg, err)
	}
	name := strings.ReplaceAll(pkg, "/", "_") + ".tinygo-"
	out := filepath.Join(dir, name+key+".wasm")
	if _, err := os.Stat(out); err == nil {
		tinygoBuilt[pkg] = out
		return out
	}
	f, err := os.CreateTemp(dir, "build-*.wasm")
	if err != nil {
		tb.Fatal(err)
	}
	partial := f.Name()
	f.Close()
	defer os.Remove(partial)
	args := append([]string{"build", "-target=" + filepath.Join(root, TinyGoTarget)}, TinyGoFlags...)
	args = append(args, "-o", partial, "./"+pkg)
	cmd := exec.Command(bin, args...)
	cmd.Dir = root
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		tb.Fatalf("tinygo build %s: %v\n%s", pkg, err, output.String())
	}
	if err := os.Rename(partial, out); err != nil {
		tb.Fatal(err)
	}
	// Builds of older sources are of no further use.
	if old, _ := filepath.Glob(filepath.Join(dir, name+"*.wasm")); len(old) > 0 {
		for _, o := range old {
			if o != out {
				os.Remove(o)
			}
		}
	}
	tinygoBuilt[pkg] = out
	return out
}

// TinyGoBytes builds pkg like TinyGoPath and returns the module bytes.
func TinyGoBytes(tb testing.TB, pkg string) []byte {
	tb.Helper()
	b, err := os.ReadFile(TinyGoPath(tb, pkg))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// tinygoKey names a TinyGo build of pkg: a hash of the toolchain binary's
// identity, the target and flags, the go.sum and go.work files (which pin
// every dependency outside the repository) and the Go files of every
// package of the repository that pkg is built from.
func tinygoKey(root, bin, pkg string) (string, error) {
	h := sha256.New()
	fi, err := os.Stat(bin)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "%s %d %d\n%q\n", bin, fi.Size(), fi.ModTime().UnixNano(), TinyGoFlags)
	for _, f := range []string{TinyGoTarget, "go.sum", "go.work", "go.work.sum", "abi/go.sum", "guest/go.sum"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if errors.Is(err, fs.ErrNotExist) && f != TinyGoTarget && f != "go.sum" {
			continue
		}
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}", "./"+pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -deps ./%s: %v\n%s", pkg, err, stderr.String())
	}
	dirs := strings.Fields(string(out))
	slices.Sort(dirs)
	for _, d := range dirs {
		fmt.Fprintf(h, "dir %s\n", d)
		if rel, err := filepath.Rel(root, d); err != nil || strings.HasPrefix(rel, "..") {
			continue // a module outside the repository, pinned by go.sum
		}
		files, err := os.ReadDir(d)
		if err != nil {
			return "", err
		}
		for _, e := range files {
			n := e.Name()
			if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(d, n))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return "", err
			}
			fmt.Fprintf(h, "%s %d\n", n, len(b))
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:8]), nil
}
