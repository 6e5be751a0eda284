package testwasm

import (
	"context"
	"fmt"
	"os"
	"strconv"
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

// Patience is how many times longer than a quiet machine needs a test
// waits for an event before it fails (WASMSCHED_TEST_PATIENCE, default 4):
// the deadlines in tests scale with the build and the load, not with a
// guess made on a quiet machine.
func Patience() int {
	if n, err := strconv.Atoi(os.Getenv("WASMSCHED_TEST_PATIENCE")); err == nil && n > 0 {
		return n
	}
	return 4
}

// Patient is how long a test waits for an event that takes expected on a
// quiet machine: Patience times expected.
func Patient(expected time.Duration) time.Duration {
	return time.Duration(Patience()) * expected
}

// Poll calls cond every interval until it holds or returns an error (which
// Poll returns), for at most Patience times expected and never past the
// test binary's deadline (less a grace period); then it returns an error
// saying how long it waited. A wait that outlasts expected is logged.
func Poll(tb testing.TB, interval, expected time.Duration, cond func(ctx context.Context) (bool, error)) error {
	tb.Helper()
	start := time.Now()
	limit := start.Add(Patient(expected))
	if d, ok := deadlineOf(tb); ok && d.Before(limit) {
		limit = d
	}
	ctx := context.Background()
	for {
		ok, err := cond(ctx)
		if err != nil {
			return err
		}
		if ok {
			if took := time.Since(start); took > expected {
				tb.Logf("waited %v, more than the %v expected", took.Round(time.Millisecond), expected)
			}
			return nil
		}
		if time.Now().After(limit) {
			return fmt.Errorf("not after %v (%d times the %v expected)", time.Since(start).Round(time.Millisecond), Patience(), expected)
		}
		time.Sleep(interval)
	}
}
