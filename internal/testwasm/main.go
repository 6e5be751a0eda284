package testwasm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

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
// With $WASMSCHED_TEST_COMPILED set (make test sets it for all its test
// processes), the compiled code in that cache is shared: see shareCompiled.
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
	if shared := os.Getenv(SharedCompiledEnv); shared != "" {
		if err := shareCompiled(cache, shared); err != nil {
			fmt.Fprintln(os.Stderr, "testwasm.Main:", err)
			os.RemoveAll(dir)
			os.Exit(2)
		}
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

// SharedCompiledEnv names a directory for compiled code that the test
// processes of one run share (make test makes it and removes it after).
const SharedCompiledEnv = "WASMSCHED_TEST_COMPILED"

// shareCompiled points the compiled code of the cache directory at shared.
// wazero keeps compiled modules in a subdirectory per wazero version and
// platform (wazero-<version>-<arch>-<os>), keyed by the hash of the module
// (as host/interrupt instrumented it) and the CPU's features, and writes
// each file under a temporary name and renames it: processes may share it,
// whether built with the race detector or not (the code wazero generates is
// the same). That subdirectory becomes a link to the same name in shared,
// so each module is compiled once per run instead of once per test process
// (a Go-built guest takes about 20 s under -race). What else the cache
// holds (lifecycle's "modules", the copies it serves after a restart) stays
// private to the process. Tests that need a compile to happen use modules
// no other process compiles (CostlyModule).
func shareCompiled(cache, shared string) error {
	if _, err := wazero.NewCompilationCacheWithDir(cache); err != nil {
		return err
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "wazero-") {
			continue
		}
		target := filepath.Join(shared, e.Name())
		if err := os.MkdirAll(target, 0o700); err != nil {
			return fmt.Errorf("%s=%s: %w", SharedCompiledEnv, shared, err)
		}
		link := filepath.Join(cache, e.Name())
		if err := os.Remove(link); err != nil {
			return err
		}
		return os.Symlink(target, link)
	}
	return fmt.Errorf("no wazero directory in %s", cache)
}
