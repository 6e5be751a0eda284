package lifecycle

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/host/compose"
	"github.com/wasmsched/wasmsched/host/policy"
	"github.com/wasmsched/wasmsched/host/source"
)

// Loading versions off the source's goroutine.
//
// Compiling a hostile module can take minutes, so a source's handlers never
// load anything: they leave the newest request in the slot's mailbox and
// return. Each slot has one loader goroutine (runLoader) that takes the
// mailbox, decides what to load, runs each load in a goroutine of its own
// (an attempt) under a context of its own, and installs or rejects what the
// attempt returns. Latest wins: a newer version cancels the load in flight
// and replaces one not started yet. Only the loader changes the version a
// slot runs (install, deactivate), so those changes keep the order the
// source reported them in.

// maxLoads bounds the loads of one policy alive at once: the one in flight
// and one abandoned that has not returned yet. An abandoned load returns as
// soon as engine.Compile sees its context cancelled, or, if it had reached
// the guest's _initialize or settings hook, which only their init deadline
// stops (10s), when that ends; until then it holds a core and its memory,
// so a burst of uploads must not pile loads up. A newer version waits
// (stage "queued") while maxLoads loads are alive.
const maxLoads = 2

// stageQueued: the version waits for an abandoned load to return.
const stageQueued = "queued"

// loadingShowAfter is how long a load runs before the status is published
// for it (and for each stage after). The status writer publishes at most
// once a second: writing for a load that ends within milliseconds would
// only delay publishing its outcome by a second.
var loadingShowAfter = 500 * time.Millisecond

// loader is a slot's loading machinery. The mailbox fields are guarded by
// the slot's mu; the rest is set once by start.
type loader struct {
	// next is the newest version handed over and not taken yet; deleted
	// says the source reported its deletion since the loader last looked.
	next    *request
	deleted bool
	// busy: something is in the mailbox or loading (for start-up).
	busy bool

	wake    chan struct{} // capacity 1: the mailbox changed
	results chan *attempt
	done    chan struct{} // closed when the loader goroutine has returned

	// inFlight counts loads not returned yet, abandoned ones included;
	// begun counts loads started. Shutdown does not wait for loads in
	// flight (an abandoned one may take up to its init deadline); tests do.
	inFlight atomic.Int32
	begun    atomic.Int64
}

// request is a version handed over by the source. For a SchedulingPolicy
// it is a revision: the module with the arguments it loads with (args;
// nil: the slot's own) under the revision's key; otherwise the key is the
// module's digest.
type request struct {
	v    source.Version
	at   time.Time
	args *PolicyArgs
	key  string
	// demand narrows the trust policy for this request (TrustedKeys).
	demand []string
}

func (r *request) loadArgs(s *Slot) PolicyArgs {
	if r.args != nil {
		return *r.args
	}
	return *s.Args()
}

// attempt is one load of a version. pend is its status entry (its Stage is
// guarded by the slot's mu). p and err are set by the attempt's goroutine
// before it sends the attempt to the loader.
type attempt struct {
	req    *request
	pend   *Pending
	cancel context.CancelFunc
	p      *policy.Policy
	err    error
}

func (a *attempt) digest() string { return a.req.v.Digest }

func (a *attempt) key() string { return a.req.key }

// offerRequest leaves r as the newest request and returns at once. A
// request still waiting in the mailbox is replaced without ever starting.
func (s *Slot) offerRequest(r *request) {
	v := r.v
	s.mu.Lock()
	old := s.load.next
	s.load.next = r
	s.load.busy = true
	s.mu.Unlock()
	if old != nil && old.key != r.key {
		s.superseded(&Pending{Digest: old.v.Digest, Origin: old.v.Origin, Since: old.at, Stage: stageQueued}, v.Digest)
	}
	s.poke()
}

// offerDeleted deactivates the policy through the loader: its source is
// gone and its arguments say to stop applying it (onDelete Deactivate). A
// version waiting in the mailbox is dropped: the deletion is newer.
func (s *Slot) offerDeleted() {
	s.mu.Lock()
	dropped := s.load.next
	s.load.next = nil
	s.load.deleted = true
	s.mu.Unlock()
	if dropped != nil {
		s.superseded(&Pending{Digest: dropped.v.Digest, Origin: dropped.v.Origin, Since: dropped.at, Stage: stageQueued}, "")
	}
	s.poke()
}

func (s *Slot) poke() {
	select {
	case s.load.wake <- struct{}{}:
	default:
	}
}

// loading reports whether a version is waiting or loading.
func (s *Slot) loading() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.load.busy
}

// runLoader is the slot's loader goroutine; it returns when ctx is done,
// cancelling the load in flight.
func (s *Slot) runLoader(ctx context.Context, logger klog.Logger) {
	l := &s.load
	defer close(l.done)
	// run is the load in flight, queued a version waiting for an
	// abandoned load to return; never both. alive counts attempts that
	// have not returned, run included.
	var run, queued *attempt
	alive := 0

	want := func(r *request) {
		d, k := r.v.Digest, r.key
		if (run != nil && run.key() == k) || (queued != nil && queued.key() == k) {
			return // the same revision is on its way
		}
		if queued != nil {
			s.superseded(queued.pend, d)
			queued = nil
		}
		if run != nil {
			run.cancel()
			s.superseded(run.pend, d)
			run = nil
		}
		if s.currentKey() == k {
			return // back to the version serving: nothing to load
		}
		queued = &attempt{req: r, pend: &Pending{Digest: d, Origin: r.v.Origin, Since: r.at, Stage: stageQueued}}
	}
	deleted := func() {
		if queued != nil {
			s.superseded(queued.pend, "")
			queued = nil
		}
		if run != nil {
			run.cancel()
			s.superseded(run.pend, "")
			run = nil
		}
		s.deleted(logger)
	}

	for {
		select {
		case <-ctx.Done():
			if run != nil {
				run.cancel()
				logger.V(2).Info("Policy load abandoned: shutting down", "policy", s.Name(), "digest", run.digest())
			}
			s.showLoading(nil, false)
			return
		case <-l.wake:
			s.mu.Lock()
			r, del := l.next, l.deleted
			l.next, l.deleted = nil, false
			s.mu.Unlock()
			// A deletion dropped the versions before it (offerDeleted),
			// so a version still here came after it.
			if del {
				deleted()
			}
			if r != nil {
				want(r)
			}
		case a := <-l.results:
			alive--
			switch {
			case a != run || ctx.Err() != nil:
				// Abandoned (superseded, recorded then) or shutting
				// down: whatever it made goes.
				if a.p != nil {
					_ = a.p.Close(context.Background())
				}
			case a.err != nil:
				run = nil
				s.reject(a.digest(), a.pend, a.err)
				if s.afterLoad != nil {
					s.afterLoad(a.req, a.err)
				}
			default:
				run = nil
				if s.beforeInstall != nil {
					s.beforeInstall(a.req)
				}
				s.install(logger, a.p, a.req, a.pend)
				if s.afterLoad != nil {
					s.afterLoad(a.req, nil)
				}
			}
		}
		if run == nil && queued != nil && alive < maxLoads {
			run, queued = queued, nil
			alive++
			s.begin(ctx, logger, run)
		}
		switch {
		case run != nil:
			s.showLoading(run.pend, true)
		case queued != nil:
			s.showLoading(queued.pend, true)
		default:
			s.showLoading(nil, false)
		}
	}
}

// begin starts a's load in its own goroutine, under a context that the
// loader cancels when a newer version supersedes it and that ends with
// ctx (shutdown).
func (s *Slot) begin(ctx context.Context, logger klog.Logger, a *attempt) {
	l := &s.load
	var actx context.Context
	actx, a.cancel = context.WithCancel(ctx)
	l.begun.Add(1)
	l.inFlight.Add(1)
	go func() {
		defer l.inFlight.Add(-1)
		var p *policy.Policy
		var err error
		if s.check != nil {
			s.setStage(a.pend, "verifying")
			err = s.check(actx, a.req)
		}
		if err == nil {
			p, err = loadVersion(actx, logger, a.req.loadArgs(s), a.req.v.Module, func(stage string) { s.setStage(a.pend, stage) }, s.bind)
		}
		a.cancel()
		a.p, a.err = p, err
		select {
		case l.results <- a:
		case <-ctx.Done(): // the loader has stopped
			if p != nil {
				_ = p.Close(context.Background())
			}
		}
	}()
}

// setStage records how far a load has got.
func (s *Slot) setStage(pend *Pending, stage string) {
	s.mu.Lock()
	pend.Stage = stage
	publish := s.status.Loading == pend && pend.published
	s.mu.Unlock()
	if publish {
		s.changed()
	}
}

// showLoading records what loads now (nil: nothing) and whether the slot
// is busy (something in the mailbox counts too). A load is published once
// it has run for loadingShowAfter; its end is published by whatever ends
// it (install, reject, superseded).
func (s *Slot) showLoading(pend *Pending, busy bool) {
	s.mu.Lock()
	changed := s.status.Loading != pend
	s.status.Loading = pend
	s.load.busy = busy || s.load.next != nil || s.load.deleted
	s.mu.Unlock()
	if !changed {
		return
	}
	if pend == nil {
		loadingSince.WithLabelValues(s.Name()).Set(0)
		return
	}
	loadingSince.WithLabelValues(s.Name()).Set(float64(pend.Since.UnixNano()) / 1e9)
	time.AfterFunc(loadingShowAfter, func() {
		s.mu.Lock()
		publish := s.status.Loading == pend
		pend.published = publish
		s.mu.Unlock()
		if publish {
			s.changed()
		}
	})
}

// endLoadingLocked takes pend out of the status when it is the version
// shown loading, so that whatever publishes pend's end (install, reject,
// superseded) does not show it loading still; the loader shows what loads
// next. s.mu is held.
func (s *Slot) endLoadingLocked(pend *Pending) {
	if pend != nil && s.status.Loading == pend {
		s.status.Loading = nil
		loadingSince.WithLabelValues(s.Name()).Set(0)
	}
}

// superseded records a version abandoned before it finished loading
// because a newer one (by; empty: the source's deletion) replaced it. It
// says nothing about the version's bytes: it is not a rejection.
func (s *Slot) superseded(pend *Pending, by string) {
	s.mu.Lock()
	stage := pend.Stage
	s.status.LastSuperseded = &Supersession{Digest: pend.Digest, Origin: pend.Origin, Stage: stage, At: time.Now(), By: by}
	s.endLoadingLocked(pend)
	s.mu.Unlock()
	reloadsTotal.WithLabelValues(s.Name(), "superseded").Inc()
	newer := by
	if newer == "" {
		newer = "(source deleted)"
	}
	klog.Background().WithName(compose.Name).Info("Policy version superseded before it finished loading", "policy", s.Name(), "digest", pend.Digest,
		"origin", pend.Origin, "stage", stage, "after", time.Since(pend.Since).Round(time.Millisecond), "by", newer, "current", s.currentDigest())
	s.changed()
}

// waitLoader waits for the loader goroutine to return, after the context
// given to start is done. Loads it abandoned may still be running; they
// close what they made.
func (s *Slot) waitLoader() {
	if s.load.done != nil {
		<-s.load.done
	}
}
