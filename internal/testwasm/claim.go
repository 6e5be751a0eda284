package testwasm

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// EnvClaims names a directory shared by several processes of one test
// binary run side by side over the same tests (make test runs test/e2e's in
// two, since its tests mostly wait on control planes and schedulers): each
// test that calls Claim then runs in exactly one of them, the first to reach
// it, so the processes share the work as they go. Unset, Claim does nothing
// and every test runs.
const EnvClaims = "WASMSCHED_TEST_CLAIMS"

var (
	claimMu sync.Mutex
	claimed = map[string]bool{} // top-level tests this process claimed
)

// Claim takes tb's top-level test for this process when the directory
// EnvClaims names is set, or skips tb when another process took that test
// first. A test calls it before anything costly (test/e2e's startCluster
// calls it); calling it again, from the test or its subtests, is cheap.
// A test that never calls it runs in every process, which wastes time but
// loses nothing. A process that dies in a test fails its run, and the
// others go on with the tests it did not reach.
func Claim(tb testing.TB) {
	tb.Helper()
	dir := os.Getenv(EnvClaims)
	if dir == "" {
		return
	}
	name, _, _ := strings.Cut(tb.Name(), "/")
	claimMu.Lock()
	defer claimMu.Unlock()
	if claimed[name] {
		return
	}
	// Tests run in their package's directory: it tells the packages
	// sharing one claims directory apart.
	wd, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256([]byte(wd))
	path := filepath.Join(dir, hex.EncodeToString(sum[:6])+"-"+name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrExist) {
		tb.Skipf("%s runs in another process sharing %s=%s", name, EnvClaims, dir)
	}
	if err != nil {
		tb.Fatalf("claim %s: %v", name, err)
	}
	fmt.Fprintln(f, os.Getpid())
	f.Close()
	claimed[name] = true
}

// SharedDir returns a directory for what the processes running one
// package's tests side by side (EnvClaims) may make once for all of them,
// under Lock: the EnvClaims directory when set, else ProcessDir.
func SharedDir(tb testing.TB) string {
	tb.Helper()
	if dir := os.Getenv(EnvClaims); dir != "" {
		return dir
	}
	return ProcessDir(tb)
}

// Lock takes an exclusive lock on path (created if missing) that holds
// across processes until the returned function is called.
func Lock(tb testing.TB, path string) (unlock func()) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		tb.Fatalf("lock %s: %v", path, err)
	}
	return func() { f.Close() }
}
