package testwasm

import (
	"testing"
	"time"
)

// waitGrace is what WaitFor leaves of the test binary's deadline (go test
// -timeout) for the test to report and clean up.
const waitGrace = 30 * time.Second

// WaitFor polls cond until it holds and returns how long that took. It
// waits on the event, not on a guess of how long the event takes: a
// machine with two busy cores building under -race can take many times
// longer than a quiet one, so the only deadline is the test binary's own
// (less a grace period), after which the test fails naming what it waited
// for. A wait that takes over a minute is logged, so that slowness shows.
func WaitFor(tb testing.TB, what string, cond func() bool) time.Duration {
	tb.Helper()
	start := time.Now()
	deadline, ok := deadlineOf(tb)
	for !cond() {
		if ok && time.Now().After(deadline) {
			tb.Fatalf("no %s after %v (the test binary's deadline is near)", what, time.Since(start).Round(time.Millisecond))
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	if took > time.Minute {
		tb.Logf("waited %v for %s", took.Round(time.Millisecond), what)
	}
	return took
}

// deadlineOf is when a wait must give up: the test binary's deadline less
// waitGrace.
func deadlineOf(tb testing.TB) (time.Time, bool) {
	t, ok := tb.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return time.Time{}, false
	}
	d, ok := t.Deadline()
	if !ok {
		return time.Time{}, false
	}
	return d.Add(-waitGrace), true
}
