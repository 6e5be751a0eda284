package lifecycle

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
)

// Loading a policy's revisions, keeping the last good one. The same for
// every store: a static policy's revisions are its source's versions with
// its configured settings and limits, its state kept by the staticStore.
//
// The spec names a revision. It is fetched (chunks, URL or file, checked
// against its digest) and handed to the slot's loader, which compiles and
// initialises it with its settings off the scheduling path. When it fails,
// at any stage:
//   - a slot that serves keeps serving what it has (in memory);
//   - a slot with nothing (start-up, or a policy just selected) falls back
//     to status.lastGood, the last revision that served a whole probation;
//   - the Rejected condition and an Event say why, the Ready condition
//     what serves instead.
//
// Probation: before a revision other than the last good one starts
// serving, this replica marks it in its status entry; once it has served
// for Args.Probation the mark is cleared and the revision becomes the last
// good one. A mark this replica finds at start-up was left by its
// previous process, which died (or was killed for failing its liveness
// probe) with that revision serving: the revision is quarantined, listed
// in status.quarantined and never loaded again while the spec names it,
// and the last good one serves.

// entry is one selected SchedulingPolicy. Fields are guarded by the
// catalog's mu, except name, slot, ctx, cancel and settled.
type entry struct {
	c      *catalog
	name   string
	slot   *Slot
	ctx    context.Context
	cancel context.CancelFunc

	sp   *api.SchedulingPolicy // the spec acted on
	want api.Revision          // the spec's revision (its tag resolved, once it is)
	// wantSpec is the key of the revision as the spec names it: want's,
	// or, for a tag, the unresolved revision's (ocitag.go).
	wantSpec string
	// gen counts wanted revisions; a fetch for an older one is dropped.
	gen int
	// revs are the revisions handed to the loader, by key (what serves
	// is one of them).
	revs map[string]api.Revision
	// failed: why a revision was refused (fetch, load, ceilings,
	// quarantine), by key.
	failed map[string]refusal
	// fallback is the last good revision's key once offered.
	fallback string
	// probation runs while a revision this replica activated is unproven.
	probation    *time.Timer
	probationKey string
	// warnedShadow is the resource version last warned about having no
	// shadow target (catalog.checkShadows).
	warnedShadow string
	// startup: the entry was made at start-up and no load has ended since
	// (marks of this replica are its previous process's).
	startup bool
	// rejected is the last refusal recorded in the slot's status and
	// metrics (key and error).
	rejected string
	// proving holds the module of the revision on probation until it is
	// proven, for stores that keep the last good module themselves
	// (store.keep).
	proving []byte

	settled     chan struct{} // closed once something serves or nothing is left to try
	settledOnce bool
}

// refusal is why a revision cannot serve: its Rejected reason (kind) and
// the error.
type refusal struct {
	kind string
	err  error
}

// newEntry makes the slot of a newly selected policy and starts its
// loader. The caller holds c.mu.
func (c *catalog) newEntry(sp *api.SchedulingPolicy) *entry {
	ctx, cancel := context.WithCancel(c.ctx)
	e := &entry{c: c, name: sp.Name, ctx: ctx, cancel: cancel, revs: map[string]api.Revision{},
		failed: map[string]refusal{}, startup: !c.started, settled: make(chan struct{})}
	s := newSlot(c.store.argsOf(sp), c.store.required(sp.Name), c.l.opts.Bind)
	name := sp.Name
	s.onChange = func() { c.status.touch(name); c.l.slotChanged() }
	s.onSwap = c.l.swapped
	s.beforeInstall = e.beforeInstall
	s.afterLoad = e.afterLoad
	if t := c.l.trust; t != nil {
		s.check = func(ctx context.Context, r *request) error { return t.check(ctx, name, r.v, r.demand) }
	}
	e.slot = s
	guestTime.add(s)
	s.startLoader(ctx, c.logger)
	return e
}

// argsOf turns a SchedulingPolicy's spec into policy arguments.
func argsOf(sp *api.SchedulingPolicy) PolicyArgs {
	pa := PolicyArgs{Name: sp.Name, Weight: sp.Spec.Weight, FailurePolicy: FailurePolicy(sp.Spec.FailurePolicy),
		Mode: Mode(sp.Spec.Mode), Shadows: sp.Spec.Shadows, Settings: sp.Spec.Settings, Timeout: sp.Spec.Timeout,
		MemoryLimit: sp.Spec.MemoryLimit, MaxInstances: int(sp.Spec.MaxInstances), Context: sp.Spec.Context}
	a := Args{Namespace: "-", Policies: []PolicyArgs{pa}}
	SetDefaults(&a)
	return a.Policies[0]
}

// revisionArgs are the arguments a revision loads with.
func (e *entry) revisionArgs(r api.Revision) *PolicyArgs {
	sp := e.sp.DeepCopy()
	sp.Spec.Settings, sp.Spec.Timeout, sp.Spec.MemoryLimit, sp.Spec.MaxInstances = r.Settings, r.Timeout, r.MemoryLimit, r.MaxInstances
	sp.Spec.Context = r.Context
	pa := e.c.store.argsOf(sp)
	return &pa
}

// setSpec acts on the resource as the informer now has it; it reports
// whether the roster must be rebuilt (mode or target changed). The caller
// holds c.mu.
func (e *entry) setSpec(sp *api.SchedulingPolicy) (rosterChanged bool) {
	prev := e.sp
	e.sp = sp
	pa := e.c.store.argsOf(sp)
	if prev == nil || prev.Spec.Mode != sp.Spec.Mode || prev.Spec.Shadows != sp.Spec.Shadows {
		rosterChanged = true
	}
	e.slot.live.Store(&pa)
	if e.c.store.pending(sp) {
		return rosterChanged // nothing to fetch yet: its source has not reported
	}
	rev := api.RevisionOf(&sp.Spec)
	specKey := rev.Key
	if sp.Status.Resolved.Matches(&rev.Module) {
		// The tag was resolved when this revision was created: its digest
		// is what loads, whatever the tag names now.
		rev = rev.Resolved(sp.Status.Resolved)
	}
	// A fetch that failed is tried again when the store says so (crdStore:
	// at each resync; the chunks may have been pushed late, the URL may
	// be back, a tag may now resolve); a spec without a module (a static
	// policy's source failed or is gone) is looked at again at each report
	// of its source.
	retry := specKey == e.wantSpec && e.c.store.refetch(prev, sp) &&
		(e.failed[e.want.Key].kind == api.ReasonFetch || (rev.Module.SHA256 == "" && !rev.Module.IsTag()))
	if specKey == e.wantSpec && !retry {
		return rosterChanged
	}
	e.want, e.wantSpec = rev, specKey
	e.gen++
	delete(e.failed, rev.Key)
	if !e.slot.hasVersion() {
		// A fallback in flight is abandoned with the generation: should
		// this fetch fail too, the last good revision is offered again.
		e.fallback = ""
	}
	if e.c.store.deactivated(sp.Name) {
		e.slot.offerDeleted()
		e.settle()
		return rosterChanged
	}
	if rev.Module.IsTag() && !rev.Module.AllowTag {
		e.refuse(rev, api.ReasonInvalid, fmt.Errorf("oci %s names a tag, not a manifest digest: pin it (REGISTRY/REPO@sha256:...), or opt in with allowTag: true (docs/policy-oci.md)", rev.Module.OCI))
		return rosterChanged
	}
	if err := e.c.checkCeilings(rev); err != nil {
		e.refuse(rev, api.ReasonInvalid, err)
		return rosterChanged
	}
	e.begin(rev)
	return rosterChanged
}

// begin fetches the wanted revision rev unless it is quarantined (a tag
// is resolved first, and begun again resolved). The caller holds c.mu.
func (e *entry) begin(rev api.Revision) {
	sp := e.sp
	if q := quarantineOf(sp, rev.Key); q != nil {
		e.refuse(rev, api.ReasonQuarantined, fmt.Errorf("revision %s is quarantined: %s (push it again with --force to retry it)", rev.Short(), q.Reason))
		return
	}
	if e.startup && !e.slot.hasVersion() {
		if m := e.c.replicaStatus(sp); m != nil && m.Probation != nil && m.Probation.Key == rev.Key && !isLastGood(sp, rev.Key) {
			e.quarantine(rev, m.Probation)
			return
		}
	}
	if rev.Module.IsTag() {
		e.resolveTag(rev, e.gen)
		return
	}
	e.fetch(rev, e.gen)
}

func quarantineOf(sp *api.SchedulingPolicy, key string) *api.Quarantine {
	for i := range sp.Status.Quarantined {
		if sp.Status.Quarantined[i].Key == key {
			return &sp.Status.Quarantined[i]
		}
	}
	return nil
}

func isLastGood(sp *api.SchedulingPolicy, key string) bool {
	return sp.Status.LastGood != nil && sp.Status.LastGood.Key == key
}

// checkCeilings refuses a revision whose limits exceed the operator's
// (static policies have no ceilings: the operator wrote their limits).
func (c *catalog) checkCeilings(r api.Revision) error {
	ce := c.store.ceilings()
	if ce == nil {
		return nil
	}
	if r.Timeout != nil && r.Timeout.Duration > ce.Timeout.Duration {
		return fmt.Errorf("timeout %v is over the scheduler's ceiling of %v", r.Timeout.Duration, ce.Timeout.Duration)
	}
	if r.MemoryLimit != nil && r.MemoryLimit.Cmp(*ce.MemoryLimit) > 0 {
		return fmt.Errorf("memoryLimit %s is over the scheduler's ceiling of %s", r.MemoryLimit, ce.MemoryLimit)
	}
	if int(r.MaxInstances) > ce.MaxInstances {
		return fmt.Errorf("maxInstances %d is over the scheduler's ceiling of %d", r.MaxInstances, ce.MaxInstances)
	}
	return nil
}

// quarantine records that rev was on probation on this replica when its
// previous process died, and falls back. The caller holds c.mu.
func (e *entry) quarantine(rev api.Revision, p *api.Probation) {
	reason := fmt.Sprintf("it had served on replica %s for %v (since %s) when the scheduler stopped without closing: the process died or failed its liveness probe within the probation of %v",
		e.c.l.replica, time.Since(p.Since.Time).Round(time.Second), p.Since.UTC().Format(time.RFC3339), e.c.l.probation())
	q := api.Quarantine{Key: rev.Key, SHA256: rev.Module.SHA256, Replica: e.c.l.replica, Reason: reason, At: metav1.Now()}
	sp := e.sp
	go func() {
		ctx, cancel := context.WithTimeout(e.ctx, markTimeout)
		defer cancel()
		err := e.c.store.update(ctx, e.name, func(sp *api.SchedulingPolicy) {
			if quarantineOf(sp, q.Key) == nil {
				sp.Status.Quarantined = append(sp.Status.Quarantined, q)
				if n := len(sp.Status.Quarantined); n > api.MaxQuarantined {
					sp.Status.Quarantined = sp.Status.Quarantined[n-api.MaxQuarantined:]
				}
			}
			e.c.setReplica(sp, func(r *api.ReplicaStatus) { r.Probation = nil })
		})
		if err != nil {
			e.c.logger.Error(err, "Could not record the quarantine in status", "policy", e.name)
		}
	}()
	e.c.logger.Error(nil, "Policy revision quarantined: the last good revision serves instead", "policy", e.name, "revision", rev.Key, "digest", rev.Module.SHA256, "reason", reason)
	e.c.event(sp, nil, v1.EventTypeWarning, EventQuarantined, fmt.Sprintf("revision %s quarantined: %s; %s", rev.Short(), reason, e.fallbackNote()))
	e.refuse(rev, api.ReasonQuarantined, fmt.Errorf("revision %s is quarantined: %s", rev.Short(), reason))
}

// fallbackNote says what serves when the spec's revision does not.
func (e *entry) fallbackNote() string {
	if lg := e.sp.Status.LastGood; lg != nil {
		return "the last good revision " + lg.Short() + " serves instead"
	}
	return "no last good revision is recorded, so nothing serves"
}

// refuse records that rev cannot serve and falls back when nothing
// serves. The caller holds c.mu.
func (e *entry) refuse(rev api.Revision, kind string, err error) {
	e.failed[rev.Key] = refusal{kind: kind, err: err}
	why := fmt.Sprintf("revision %s: %v", rev.Short(), err)
	if w, ok := e.failed[e.want.Key]; ok && rev.Key != e.want.Key {
		// A fallback failed too: both reasons matter to whoever reads why
		// pods wait.
		why = fmt.Sprintf("revision %s: %v; the last good revision %s cannot serve either: %v", e.want.Short(), w.err, rev.Short(), err)
	}
	e.slot.setMissing(why)
	if note := rev.Key + "\x00" + err.Error(); kind != api.ReasonLoadFailed && kind != api.ReasonUntrusted && note != e.rejected {
		// The loader recorded a load's failure itself; a refusal repeated
		// (a fetch retried at each resync) is recorded once.
		e.rejected = note
		e.slot.reject(rev.Module.SHA256, nil, err)
	}
	switch {
	case rev.Key == e.want.Key && kind == api.ReasonUntrusted:
		e.c.event(e.sp, err, v1.EventTypeWarning, EventUntrusted, e.c.store.rejectedNote(e, rev, err))
	case rev.Key == e.want.Key && kind != api.ReasonQuarantined:
		e.c.event(e.sp, err, v1.EventTypeWarning, EventRejected, e.c.store.rejectedNote(e, rev, err))
	}
	e.c.status.touch(e.name)
	if e.slot.hasVersion() {
		e.settle()
		return
	}
	e.tryFallback()
}

// servingNote says what keeps serving after a refusal.
func (e *entry) servingNote() string {
	if k := e.slot.currentKey(); k != "" {
		if r, ok := e.revs[k]; ok {
			return "revision " + r.Short() + " keeps serving"
		}
	}
	return e.fallbackNote()
}

// tryFallback offers the last good revision, once, if it can serve. The
// caller holds c.mu.
func (e *entry) tryFallback() {
	lg := e.sp.Status.LastGood
	switch {
	case lg == nil || e.fallback == lg.Key || lg.Key == e.want.Key:
	case lg.Verify() != nil:
		e.c.logger.Error(lg.Verify(), "Ignoring status.lastGood", "policy", e.name)
	case quarantineOf(e.sp, lg.Key) != nil || e.failed[lg.Key].err != nil:
	default:
		e.fallback = lg.Key
		e.c.logger.Info("Falling back to the last good revision", "policy", e.name, "revision", lg.Key, "digest", lg.Module.SHA256)
		e.fetch(*lg, e.gen)
		return
	}
	e.settle()
}

// settle marks the entry's start-up as over. The caller holds c.mu.
func (e *entry) settle() {
	if !e.settledOnce {
		e.settledOnce = true
		close(e.settled)
	}
}

// fetch gets rev's bytes on a goroutine of its own and hands them to the
// loader, unless a newer revision is wanted by then (gen). The caller
// holds c.mu.
func (e *entry) fetch(rev api.Revision, gen int) {
	args := e.revisionArgs(rev)
	e.slot.setMissing("")
	go func() {
		ctx, cancel := context.WithTimeout(e.ctx, 3*time.Minute)
		defer cancel()
		v, err := e.c.fetch(ctx, e.name, rev.Module)
		e.c.mu.Lock()
		defer e.c.mu.Unlock()
		if e.ctx.Err() != nil || (gen != e.gen) {
			return
		}
		if err != nil {
			e.c.logger.Error(err, "Policy module cannot be fetched", "policy", e.name, "revision", rev.Key)
			e.refuse(rev, api.ReasonFetch, err)
			return
		}
		e.revs[rev.Key] = rev
		e.slot.offerRequest(&request{v: v, at: time.Now(), args: args, key: rev.Key, demand: e.sp.Spec.TrustedKeys})
	}()
}

// beforeInstall marks a revision on probation before it serves (on the
// loader goroutine): if the process dies with it serving, the next start
// finds the mark. The write is bounded by markTimeout; when it fails the
// revision serves unmarked, and the failure is logged.
func (e *entry) beforeInstall(r *request) {
	e.c.mu.Lock()
	lastGood := isLastGood(e.sp, r.key)
	e.c.mu.Unlock()
	if lastGood {
		return
	}
	ctx, cancel := context.WithTimeout(e.ctx, markTimeout)
	defer cancel()
	since := metav1.Now()
	err := e.c.store.update(ctx, e.name, func(sp *api.SchedulingPolicy) {
		e.c.setReplica(sp, func(rs *api.ReplicaStatus) { rs.Probation = &api.Probation{Key: r.key, Since: since} })
	})
	if err != nil {
		e.c.logger.Error(err, "Could not mark the revision on probation before it serves: a crash now would not quarantine it", "policy", e.name, "revision", r.key)
	}
}

// afterLoad hears each load's outcome (on the loader goroutine).
func (e *entry) afterLoad(r *request, err error) {
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	rev, ok := e.revs[r.key]
	if !ok || e.ctx.Err() != nil {
		return
	}
	e.startup = false
	if err != nil {
		kind := api.ReasonLoadFailed
		if isUntrusted(err) {
			kind = api.ReasonUntrusted
		}
		e.refuse(rev, kind, err)
		return
	}
	e.settle()
	if r.key != e.want.Key {
		e.c.event(e.sp, nil, v1.EventTypeWarning, EventServingLastGood, fmt.Sprintf("revision %s serves instead of the spec's %s, which was refused: %v",
			rev.Short(), e.want.Short(), e.failed[e.want.Key].err))
	} else {
		e.c.event(e.sp, nil, v1.EventTypeNormal, EventServing, "revision "+rev.Short()+" serves")
	}
	if e.probation != nil {
		e.probation.Stop()
		e.probation = nil
	}
	e.proving = nil
	if isLastGood(e.sp, r.key) {
		return
	}
	e.probationKey = r.key
	e.proving = r.v.Module
	e.probation = time.AfterFunc(e.c.l.probation(), func() { e.prove(rev) })
}

// prove makes rev the last good revision once it has served its
// probation, if it still serves.
func (e *entry) prove(rev api.Revision) {
	if e.slot.currentKey() != rev.Key || e.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	e.c.mu.Lock()
	module := e.proving
	e.c.mu.Unlock()
	// The module first: a last good revision whose bytes cannot be found
	// is no fallback.
	if err := e.c.store.keep(rev, module); err != nil {
		e.c.logger.Error(err, "Could not keep the module of the revision proven: a restart could not fall back to it", "policy", e.name, "revision", rev.Key)
	}
	now := metav1.Now()
	err := e.c.store.update(ctx, e.name, func(sp *api.SchedulingPolicy) {
		st := &sp.Status
		st.LastGood = rev.DeepCopy()
		hist := []api.HistoryEntry{{Revision: rev, ProvenAt: now}}
		for _, h := range st.History {
			if h.Key != rev.Key {
				hist = append(hist, h)
			}
		}
		st.History = hist[:min(len(hist), api.MaxHistory)]
		e.c.setReplica(sp, func(r *api.ReplicaStatus) {
			if r.Probation != nil && r.Probation.Key == rev.Key {
				r.Probation = nil
			}
		})
	})
	if err != nil {
		e.c.logger.Error(err, "Could not record the last good revision", "policy", e.name, "revision", rev.Key)
		e.c.mu.Lock()
		if e.probationKey == rev.Key && e.ctx.Err() == nil {
			e.probation = time.AfterFunc(10*time.Second, func() { e.prove(rev) })
		}
		e.c.mu.Unlock()
		return
	}
	e.c.logger.Info("Policy revision proven: it is the last good revision", "policy", e.name, "revision", rev.Key, "digest", rev.Module.SHA256)
	e.c.mu.Lock()
	e.probation, e.probationKey, e.proving = nil, "", nil
	e.c.mu.Unlock()
}

// remove retires the entry's slot: the policy is no longer selected. Its
// version serves the cycles pinned to it until they end.
func (e *entry) remove() {
	e.c.mu.Lock()
	if e.probation != nil {
		e.probation.Stop()
	}
	e.c.mu.Unlock()
	e.cancel()
	go func() {
		e.slot.waitLoader()
		guestTime.remove(e.slot)
		loadingSince.DeleteLabelValues(e.name)
		if p := e.slot.swap(nil); p != nil {
			e.slot.retire(e.c.logger, p)
		}
	}()
}
