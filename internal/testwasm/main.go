package testwasm

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/wasmsched/wasmsched/internal/tmpdir"
)

// processDir is the directory Main made for this test process; "" when the
// package's TestMain is not Main.
var processDir string

// Main is the TestMain of every package whose tests load policy modules or
// start processes that do, in one line:
//
//	func TestMain(m *testing.M) { testwasm.Main(m) }
//
// It calls each of setup in order (controlplane.QuietLogs, for packages
// whose Kubernetes code logs before a control plane starts), then makes a
// directory private to the test process, ProcessDir, and points
// WASMSCHED_CACHE_DIR at a cache inside it: each module is compiled once per
// test process rather than once per load, never into the user's cache, and
// the processes a test starts (`wasmsched eval`, a kube-scheduler) share
// that cache. After the tests it removes the directory and exits with their
// status; a test process killed before that (at its -timeout) leaves it,
// and the next test process removes it (internal/tmpdir).
//
// host/engine compiles a module in a child process that is this test binary
// again: the child does its work in host/engine's init and exits before
// TestMain runs, so Main has nothing to do for it, and any test binary that
// links host/engine can compile in a child.
func Main(m *testing.M, setup ...func()) {
	for _, f := range setup {
		f()
	}
	dir, err := tmpdir.Make("wasmsched-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testwasm.Main:", err)
		os.Exit(2)
	}
	cache := filepath.Join(dir, "cache")
	if err := os.Mkdir(cache, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "testwasm.Main:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	processDir = dir
	os.Setenv("WASMSCHED_CACHE_DIR", cache)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// ProcessDir returns the directory Main made for this test process, which
// Main removes once every test has run: the place for what costs too much to
// make per test (test/e2e's kube-scheduler binary). It fails tb when the
// package's TestMain is not Main.
func ProcessDir(tb testing.TB) string {
	tb.Helper()
	if processDir == "" {
		tb.Fatal("testwasm.ProcessDir: the package's TestMain must be testwasm.Main")
	}
	return processDir
}

// SkipUnderRace skips a test in a binary built with the race detector: for
// a test that is sequential (nothing for the detector to find) and spends
// tens of seconds there compiling Go-built guests with wazero's
// instrumented compiler. make test runs such a package a second time
// without -race (the Makefile's ALSO_PLAIN), where the test runs.
func SkipUnderRace(tb testing.TB) {
	tb.Helper()
	if Race {
		tb.Skip("sequential, and costly under -race (compiling Go-built guests): runs without -race")
	}
}
