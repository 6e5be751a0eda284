package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"

	"k8s.io/kubernetes/test/utils/ktesting"
)

// hostTB stands in for *testing.T when Kubernetes' test helpers run outside a
// test. It implements ktesting.TB (an interface without unexported methods,
// unlike testing.TB): failures are recorded and turned into an error, log
// lines go to a Logf function, cleanups run when the control plane stops.
//
// Like testing.T, FailNow, Fatal and Skip end the calling goroutine; the
// helper must therefore run on a goroutine of its own (see startAPIServer).
// All methods are safe for concurrent use.
type hostTB struct {
	name string
	root string // TempDir creates directories here; the owner removes it
	logf func(format string, args ...any)

	mu       sync.Mutex
	closed   bool // after close, log lines are dropped
	failed   bool
	skipped  bool
	errs     []string
	cleanups []func()
}

var _ ktesting.TB = (*hostTB)(nil)

func init() {
	// ktesting's init (it is imported by the API server test helper) catches
	// SIGINT for the whole process and turns it into cancelling every context
	// it made: a Ctrl-C would then stop the API server silently and leave the
	// process running. Restore the default, so Stop is the only way a control
	// plane ends and a program that wants SIGINT asks for it itself. Package
	// initialisation runs after ktesting's and before main, so this cannot
	// undo a handler that main installs.
	signal.Reset(os.Interrupt)
}

func newHostTB(name, root string, logf func(string, ...any)) *hostTB {
	return &hostTB{name: name, root: root, logf: logf}
}

// failure returns the recorded failures as one error, or a generic one when
// the helper gave up without saying why.
func (t *hostTB) failure() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case len(t.errs) > 0:
		return errors.New(strings.Join(t.errs, "; "))
	case t.skipped:
		return errors.New("start-up was skipped")
	default:
		return errors.New("start-up failed")
	}
}

// runCleanups runs the registered cleanups, last registered first.
func (t *hostTB) runCleanups() {
	for {
		t.mu.Lock()
		n := len(t.cleanups)
		if n == 0 {
			t.mu.Unlock()
			return
		}
		f := t.cleanups[n-1]
		t.cleanups = t.cleanups[:n-1]
		t.mu.Unlock()
		f()
	}
}

// close drops every later log line: goroutines that outlive Stop must not
// call a test's Logf after the test has finished (testing panics then).
func (t *hostTB) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

func (t *hostTB) record(msg string) {
	t.mu.Lock()
	t.failed = true
	t.errs = append(t.errs, msg)
	t.mu.Unlock()
	t.Log("ERROR: " + msg)
}

func (t *hostTB) Cleanup(f func()) {
	t.mu.Lock()
	t.cleanups = append(t.cleanups, f)
	t.mu.Unlock()
}

func (t *hostTB) Error(args ...any)                 { t.record(fmt.Sprint(args...)) }
func (t *hostTB) Errorf(format string, args ...any) { t.record(fmt.Sprintf(format, args...)) }

func (t *hostTB) Fail() {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
}

func (t *hostTB) FailNow() {
	t.Fail()
	runtime.Goexit()
}

func (t *hostTB) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *hostTB) Fatal(args ...any) {
	t.record(fmt.Sprint(args...))
	runtime.Goexit()
}

func (t *hostTB) Fatalf(format string, args ...any) {
	t.record(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (t *hostTB) Helper() {}

func (t *hostTB) Log(args ...any) {
	t.Logf("%s", strings.TrimSuffix(fmt.Sprintln(args...), "\n"))
}

// Logf formats the line itself, rather than pass format and args on to
// t.logf, so that go vet sees a printf wrapper (it cannot see through a
// function value) and checks the calls of Logf and Skipf.
func (t *hostTB) Logf(format string, args ...any) {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if !closed {
		t.logf("%s", fmt.Sprintf(format, args...))
	}
}

func (t *hostTB) Name() string { return t.name }

// Setenv sets an environment variable until the control plane stops. Unlike
// testing.T.Setenv it cannot keep parallel users apart: the environment is
// the process's.
func (t *hostTB) Setenv(key, value string) {
	old, had := os.LookupEnv(key)
	if err := os.Setenv(key, value); err != nil {
		t.Fatalf("setenv %s: %v", key, err)
	}
	t.Cleanup(func() {
		if had {
			_ = os.Setenv(key, old)
		} else {
			_ = os.Unsetenv(key)
		}
	})
}

// Attr logs a key and value (testing.T.Attr reports it to the test runner).
func (t *hostTB) Attr(key, value string) { t.Logf("%s: %s", key, value) }

// Chdir changes the working directory until the control plane stops. Like
// Setenv it is the process's.
func (t *hostTB) Chdir(dir string) {
	old, err := os.Getwd()
	if err != nil {
		t.Fatalf("chdir %s: %v", dir, err)
	}
	if err := os.Chdir(dir); err != nil {
		t.Fatalf("chdir %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = os.Chdir(old) })
}

func (t *hostTB) Skip(args ...any) {
	t.Log(args...)
	t.SkipNow()
}

func (t *hostTB) Skipf(format string, args ...any) {
	t.Logf(format, args...)
	t.SkipNow()
}

func (t *hostTB) SkipNow() {
	t.mu.Lock()
	t.skipped = true
	t.mu.Unlock()
	runtime.Goexit()
}

func (t *hostTB) Skipped() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.skipped
}

// TempDir returns a new directory under the control plane's temporary root,
// removed when the control plane stops.
func (t *hostTB) TempDir() string {
	dir, err := os.MkdirTemp(t.root, "tmp-")
	if err != nil {
		t.Fatalf("TempDir: %v", err)
	}
	return dir
}
