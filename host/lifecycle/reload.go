package lifecycle

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/host/compose"
	"github.com/wasmsched/wasmsched/host/policy"
)

// Timing of reloads, variables so tests can shorten them.
var (
	// startupTimeout bounds the wait for a policy's first version.
	startupTimeout = 60 * time.Second
	// retireIdle is how long a replaced version must go unused before it
	// is closed; retireMax forces it (a pod may wait at Permit up to
	// compose.MaxPermitWait on the version it started with).
	retireIdle = 5 * time.Second
	retirePoll = 500 * time.Millisecond
	retireMax  = compose.MaxPermitWait + time.Minute
	filePoll   = time.Second
)

// SlotStatus is what a slot reports: the version it runs, the version it
// is loading, and the last upload it refused or abandoned.
type SlotStatus struct {
	Policy   string    `json:"policy"`
	Mode     Mode      `json:"mode"`
	Digest   string    `json:"digest,omitempty"`
	Origin   string    `json:"origin,omitempty"`
	LoadedAt time.Time `json:"loadedAt,omitempty"`
	Active   bool      `json:"active"`
	// Key identifies what serves: a SchedulingPolicy's revision key, or
	// the module's digest.
	Key     string `json:"key,omitempty"`
	Reloads int    `json:"reloads"`
	// LastRejected is the last version (or source state) refused, and why.
	LastRejected *Rejection `json:"lastRejected,omitempty"`
	// Loading is the version being loaded now, if any: it is neither
	// serving nor refused yet.
	Loading *Pending `json:"loading,omitempty"`
	// LastSuperseded is the last version abandoned before it finished
	// loading because a newer one replaced it.
	LastSuperseded *Supersession `json:"lastSuperseded,omitempty"`
	// Weight, FailurePolicy and Source are the policy's arguments as
	// configured (a URL with its password redacted): what `wasmsched
	// explain` needs to run a static policy as the scheduler does.
	Weight        int64         `json:"weight,omitempty"`
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`
	Source        *Source       `json:"source,omitempty"`
}

// Pending is a version being loaded.
type Pending struct {
	Digest string `json:"digest"`
	Origin string `json:"origin,omitempty"`
	// Since is when the source handed the version over.
	Since time.Time `json:"since"`
	// Stage is how far the load has got: "queued" (waiting for an
	// abandoned load to return), "compiling", "initialising" (the first
	// instance's _initialize and settings).
	Stage string `json:"stage"`

	// published: the status has been published with this load (the
	// slot's mu guards it).
	published bool
}

// Supersession is a version abandoned before it finished loading because a
// newer version (or the deletion of the source, with onDelete Deactivate)
// replaced it. It says nothing about the version's bytes.
type Supersession struct {
	Digest string    `json:"digest"`
	Origin string    `json:"origin,omitempty"`
	At     time.Time `json:"at"`
	// Stage is how far its load had got.
	Stage string `json:"stage"`
	// By is the digest of the version that replaced it; empty when the
	// source was deleted.
	By string `json:"by,omitempty"`
}

// Rejection is a refused upload.
type Rejection struct {
	Digest string    `json:"digest,omitempty"`
	At     time.Time `json:"at"`
	Error  string    `json:"error"`
}

// startLoader runs the slot's loader goroutine (loader.go) for the life of
// ctx.
func (s *Slot) startLoader(ctx context.Context, logger klog.Logger) {
	s.load.wake = make(chan struct{}, 1)
	s.load.results = make(chan *attempt)
	s.load.done = make(chan struct{})
	go s.runLoader(ctx, logger)
}

func describeSource(src Source) string {
	switch {
	case src.ConfigMap != "":
		return "configMap " + src.ConfigMap
	case src.URL != "":
		return "url " + src.URL
	}
	return "file " + src.File
}

// install swaps in p, a version of v loaded and validated off the
// scheduling path (compiled, started, initialised with the settings) by
// the loader, which calls it; pend is its load (since when the source
// handed v over). The previous version keeps serving the cycles pinned to
// it and is closed once unused.
func (s *Slot) install(logger klog.Logger, p *policy.Policy, r *request, pend *Pending) {
	v, since := r.v, pend.Since
	old := s.swap(p)
	s.deactivated.Store(false)
	reloadDuration.WithLabelValues(s.Name()).Observe(time.Since(since).Seconds())
	reloadsTotal.WithLabelValues(s.Name(), "success").Inc()
	s.mu.Lock()
	s.status.Digest, s.status.Origin, s.status.LoadedAt, s.status.Active = p.Digest(), v.Origin, p.LoadedAt(), true
	s.status.Key = r.key
	if old != nil {
		s.status.Reloads++
	}
	s.endLoadingLocked(pend)
	s.mu.Unlock()
	s.changed()
	// A first version matters to pods too when the policy is required:
	// they waited for it (cycle.go's blockers).
	if (old != nil || s.required) && s.onSwap != nil {
		s.onSwap(s.Name())
	}
	if old != nil {
		logger.Info("Policy version swapped", "policy", s.Name(), "from", old.Digest(), "to", p.Digest(), "origin", v.Origin, "duration", time.Since(since))
		s.retire(logger, old)
	}
}

// retire closes old, a version replaced or deactivated, once nothing uses
// it (policy.Policy.Retire), on a goroutine of its own; its instances count
// in wasmsched_policy_instances until then.
func (s *Slot) retire(logger klog.Logger, old *policy.Policy) {
	done := instances.retire(s.Name(), old)
	go func() {
		defer done()
		_ = old.Retire(context.Background(), retireIdle, retirePoll, retireMax)
		logger.V(2).Info("Policy version retired", "policy", s.Name(), "digest", old.Digest())
	}()
}

// reject records a refused revision: log, metric and the slot's status;
// pend is its load when the loader refused it (nil: refused before one).
// The current version keeps serving. The policy's entry posts the Event
// (revision.go's refuse).
func (s *Slot) reject(digest string, pend *Pending, err error) {
	reloadsTotal.WithLabelValues(s.Name(), "rejected").Inc()
	if cur := s.currentDigest(); cur != "" {
		klog.Background().WithName(compose.Name).Error(err, "Policy upload rejected; the current version keeps serving", "policy", s.Name(), "digest", digest, "current", cur)
	} else {
		klog.Background().WithName(compose.Name).Error(err, "Policy upload rejected; no version serves", "policy", s.Name(), "digest", digest)
	}
	s.mu.Lock()
	s.status.LastRejected = &Rejection{Digest: digest, At: time.Now(), Error: err.Error()}
	s.endLoadingLocked(pend)
	s.mu.Unlock()
	s.changed()
}

// deleted deactivates the policy: its source disappeared and its
// arguments say to stop applying it then (onDelete Deactivate). The loader
// calls it.
func (s *Slot) deleted(logger klog.Logger) {
	s.deactivated.Store(true)
	if old := s.swap(nil); old != nil {
		s.retire(logger, old)
	}
	s.mu.Lock()
	s.status.Active = false
	s.mu.Unlock()
	if s.onSwap != nil {
		s.onSwap(s.Name())
	}
	logger.Info("Policy source deleted: policy deactivated (onDelete: Deactivate)", "policy", s.Name())
	s.changed()
}

// currentKey is the key of the request the current version was loaded
// from (a revision's key, or the module's digest); empty when none serves.
func (s *Slot) currentKey() string {
	if s.Current() == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status.Key
}

// NoVersionReason says why a slot has no version: the latest refusal, or
// that its first version is still loading.
func (s *Slot) NoVersionReason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.missing != "" {
		return s.missing // the latest refusal of a SchedulingPolicy's revision
	}
	if r := s.status.LastRejected; r != nil {
		return r.Error
	}
	return "its first version is still loading"
}

func (s *Slot) currentDigest() string {
	if p := s.Current(); p != nil {
		return p.Digest()
	}
	return ""
}

// Status returns a copy of the slot's status.
func (s *Slot) Status() SlotStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	if st.LastRejected != nil {
		r := *st.LastRejected
		st.LastRejected = &r
	}
	if st.Loading != nil {
		l := *st.Loading
		st.Loading = &l
	}
	if st.LastSuperseded != nil {
		sup := *st.LastSuperseded
		st.LastSuperseded = &sup
	}
	return st
}

func (s *Slot) changed() {
	if s.onChange != nil {
		s.onChange()
	}
}

// close closes the slot's version and stops reporting its metrics
// (shutdown, once the slot's context is done). It waits for the slot's
// loader to stop, so that no version is installed after it; loads still
// running close what they make.
func (s *Slot) close() {
	s.waitLoader()
	guestTime.remove(s)
	loadingSince.DeleteLabelValues(s.Name())
	if p := s.swap(nil); p != nil {
		_ = p.Close(context.Background())
	}
}
