package source

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recorder runs a source and records what it reports, in order.
type recorder struct {
	mu     sync.Mutex
	events []event
	wake   chan struct{}
	busy   atomic.Bool // a handler is running
	t      *testing.T
}

type event struct {
	version *Version
	err     error
	deleted bool
}

// run starts src and stops it when the test ends, checking that Run
// returns and that handlers never overlap.
func run(t *testing.T, src Source) *recorder {
	t.Helper()
	r := &recorder{wake: make(chan struct{}, 1), t: t}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		src.Run(ctx, Handlers{
			Version: func(v Version) { r.add(event{version: &v}) },
			Error:   func(err error) { r.add(event{err: err}) },
			Deleted: func() { r.add(event{deleted: true}) },
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	return r
}

func (r *recorder) add(e event) {
	if !r.busy.CompareAndSwap(false, true) {
		r.t.Error("handlers called concurrently")
	}
	defer r.busy.Store(false)
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// next waits for the event after the n already seen.
func (r *recorder) next(t *testing.T, seen *int, timeout time.Duration) event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		r.mu.Lock()
		if len(r.events) > *seen {
			e := r.events[*seen]
			*seen++
			r.mu.Unlock()
			return e
		}
		r.mu.Unlock()
		select {
		case <-r.wake:
		case <-deadline:
			t.Fatalf("no event within %s (after %d)", timeout, *seen)
		}
	}
}

// quiet checks that nothing more is reported for d.
func (r *recorder) quiet(t *testing.T, seen int, d time.Duration) {
	t.Helper()
	time.Sleep(d)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events[seen:] {
		t.Errorf("unexpected event %s", e)
	}
}

func (e event) String() string {
	switch {
	case e.version != nil:
		return "version " + e.version.Digest + " from " + e.version.Origin
	case e.err != nil:
		return "error " + e.err.Error()
	default:
		return "deleted"
	}
}
