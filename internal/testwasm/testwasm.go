// Package testwasm builds real policy modules for tests, from the Go
// packages in this repository, the way `make examples` does (Path, Bytes)
// and the way `make examples-tinygo` does (TinyGoPath, TinyGoBytes). Builds
// are cached per process and by the Go build cache, TinyGo builds on disk,
// so asking twice is cheap. Agree runs a test against both builds and
// requires them to give the same results. Main is the TestMain of the
// packages whose tests load modules: it gives them a compilation cache of
// their own.
package testwasm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	mu     sync.Mutex
	built  = map[string]string{}
	tmpDir string
)

// Root returns the repository root (the directory holding go.mod).
func Root(tb testing.TB) string {
	tb.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		tb.Fatalf("go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		tb.Fatalf("not inside the wasmsched module")
	}
	return filepath.Dir(mod)
}

// Path builds the Go package at pkg (relative to the repository root, for
// example "examples/nodepin") as a wasip1 reactor and returns the path of
// the .wasm file.
func Path(tb testing.TB, pkg string) string {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	if p, ok := knownLocked(tb, built, EnvModules, pkg, ".wasm"); ok {
		return p
	}
	root := Root(tb)
	out := filepath.Join(cacheDir(tb, root), strings.ReplaceAll(pkg, "/", "_")+".wasm")
	// Build to a private name and rename, so test processes of other
	// packages building the same module concurrently never see half a file.
	f, err := os.CreateTemp(tmpDir, "build-*.wasm")
	if err != nil {
		tb.Fatal(err)
	}
	partial := f.Name()
	f.Close()
	defer os.Remove(partial)
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w", "-o", partial, "./"+pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("build %s: %v\n%s", pkg, err, stderr.String())
	}
	if err := os.Rename(partial, out); err != nil {
		tb.Fatal(err)
	}
	built[pkg] = out
	return out
}

// EnvModules names a directory of example modules already built (`make
// examples` writes bin/policies; a relative path is the repository's): Path and Bytes take examples/<name> from
// <dir>/<name>.wasm instead of building it, so that the tests of every
// Kubernetes minor load the same files (make smoke).
const EnvModules = "WASMSCHED_MODULES"

// known returns pkg's module when this process has it already (in cache,
// built or prebuilt) or the directory env names holds it.
func known(tb testing.TB, cache map[string]string, env, pkg, suffix string) (string, bool) {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	return knownLocked(tb, cache, env, pkg, suffix)
}

// knownLocked is known for a caller holding mu.
func knownLocked(tb testing.TB, cache map[string]string, env, pkg, suffix string) (string, bool) {
	tb.Helper()
	if p, ok := cache[pkg]; ok {
		return p, true
	}
	p, ok := prebuilt(tb, env, pkg, suffix)
	if ok {
		cache[pkg] = p
	}
	return p, ok
}

// prebuilt returns <$env>/<name><suffix> for pkg examples/<name> when the
// environment variable env names a directory; a module missing there fails
// the test rather than being built.
func prebuilt(tb testing.TB, env, pkg, suffix string) (string, bool) {
	tb.Helper()
	dir, name := os.Getenv(env), strings.TrimPrefix(pkg, "examples/")
	if dir == "" || name == pkg {
		return "", false
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(Root(tb), dir) // tests run in their package's directory
	}
	p := filepath.Join(dir, name+suffix)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("%s=%s: no module for %s: %v", env, dir, pkg, err)
	}
	return p, true
}

// cacheDir returns the directory holding this checkout's builds, creating
// it. One directory per checkout, reused by every test process: the go build
// cache makes rebuilding cheap, and nothing piles up in /tmp. The caller
// holds mu.
func cacheDir(tb testing.TB, root string) string {
	tb.Helper()
	if tmpDir == "" {
		sum := sha256.Sum256([]byte(root))
		dir := filepath.Join(os.TempDir(), "wasmsched-testwasm-"+hex.EncodeToString(sum[:6]))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		tmpDir = dir
	}
	return tmpDir
}

// Bytes builds pkg like Path and returns the module bytes.
func Bytes(tb testing.TB, pkg string) []byte {
	tb.Helper()
	b, err := os.ReadFile(Path(tb, pkg))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
