package lifecycle

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/source"
)

// The catalog: a profile's policies and their revisions, whatever declares
// them.
//
// A store (store.go) says which policies the profile runs and which
// revision (module, settings, limits: api.Revision) each wants, and keeps
// each policy's state: SchedulingPolicy resources (crdStore), or the
// plugin's arguments with their sources (staticStore). The catalog keeps
// the profile's roster in step: a slot per policy, created when the policy
// appears, retired when it goes, its weight, failure policy and mode
// changed in place, and each new revision fetched and handed to the
// slot's loader, which validates it off the scheduling path and keeps the
// last good version when it is refused (revision.go). Status goes back
// through the store (policystatus.go).
//
// One goroutine (run) applies the store's changes, in order; loads report
// back on their slots' loader goroutines under mu.

// Timing of the catalog, variables so tests can shorten them.
var (
	// catalogResync re-reads every resource periodically, retrying
	// fetches that failed (a chunk pushed late, a URL that was down).
	catalogResync = 30 * time.Second
	// statusHeartbeat refreshes each replica's status entry;
	// replicaExpiry prunes entries not refreshed for that long.
	statusHeartbeat = time.Minute
	replicaExpiry   = 5 * time.Minute
	// markTimeout bounds the synchronous status write that marks a
	// revision on probation before it is activated.
	markTimeout = 5 * time.Second
)

// catalog is a profile's policies. Its fields are set once by newCatalog,
// except entries and started (guarded by mu).
type catalog struct {
	l      *Lifecycle
	store  store
	logger klog.Logger
	ctx    context.Context

	changed chan struct{}
	status  *policyStatusWriter
	events  *eventSink

	mu      sync.Mutex
	entries map[string]*entry
	// started: the first reconcile is over; entries made before it were
	// made at start-up, when a probation marker left by this replica
	// means its previous process died (revision.go).
	started bool
	wg      sync.WaitGroup
}

// newCatalog starts the store and waits (up to startupTimeout) for the
// first version of each policy, or its failure: a policy never stops the
// scheduler from starting.
func newCatalog(ctx context.Context, l *Lifecycle, st store) *catalog {
	c := &catalog{l: l, store: st, logger: l.logger, ctx: ctx, changed: make(chan struct{}, 1), entries: map[string]*entry{}}
	c.status = newPolicyStatusWriter(c)
	c.events = newEventSink(l.opts.Recorder, l.opts.EventsReady)

	startup, cancelStartup := context.WithTimeout(ctx, startupTimeout)
	defer cancelStartup()
	st.start(ctx, startup, c.poke)
	c.reconcile()
	c.mu.Lock()
	c.started = true
	var waits []<-chan struct{}
	for _, e := range c.entries {
		waits = append(waits, e.settled)
	}
	c.mu.Unlock()
	// Changes are applied while start-up waits: a static policy's first
	// version is its source's first report, which comes after the first
	// reconcile.
	c.wg.Add(3)
	go func() { defer c.wg.Done(); c.run() }()
	go func() { defer c.wg.Done(); c.events.release(ctx) }()
	go func() { defer c.wg.Done(); c.status.run(ctx) }()
	for _, w := range waits {
		select {
		case <-w:
		case <-startup.Done():
		}
	}
	return c
}

func (c *catalog) poke() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// run applies changes until the lifecycle closes.
func (c *catalog) run() {
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.changed:
			c.reconcile()
		}
	}
}

// close stops the catalog's goroutines, clears this replica's probation
// marks (a scheduler stopped on purpose did not die of its policies) and
// closes every slot. The lifecycle's context is already cancelled.
func (c *catalog) close() {
	c.wg.Wait()
	c.mu.Lock()
	var marked []string
	for name, e := range c.entries {
		if e.probation != nil {
			e.probation.Stop()
			marked = append(marked, name)
		}
	}
	entries := c.entries
	c.entries = map[string]*entry{}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, name := range marked {
		_ = c.store.update(ctx, name, func(sp *api.SchedulingPolicy) {
			c.setReplica(sp, func(r *api.ReplicaStatus) { r.Probation = nil })
		})
	}
	for _, e := range entries {
		e.cancel()
	}
	for _, e := range entries {
		e.slot.close()
	}
}

// reconcile brings the entries and the roster in line with the store.
func (c *catalog) reconcile() {
	sel, blocked := c.store.selected()
	c.mu.Lock()
	keep := map[string]bool{}
	changedRoster := false
	// touched are the policies whose change may turn a rejection into a
	// fit: those gone and those whose spec changed.
	var touched []string
	for _, sp := range sel {
		keep[sp.Name] = true
		e := c.entries[sp.Name]
		if e == nil {
			e = c.newEntry(sp)
			c.entries[sp.Name] = e
			changedRoster = true
		}
		if e.setSpec(sp) {
			changedRoster = true
			touched = append(touched, sp.Name)
		}
	}
	var gone []*entry
	for name, e := range c.entries {
		if !keep[name] {
			gone = append(gone, e)
			delete(c.entries, name)
			changedRoster = true
			touched = append(touched, name)
		}
	}
	c.mu.Unlock()
	for _, e := range gone {
		c.logger.Info("SchedulingPolicy no longer selected: the policy stops applying", "policy", e.name)
		e.remove()
		c.status.touch(e.name) // drops this replica's entry, if the resource is still there
	}
	old := c.l.roster.Load()
	r := c.rosterFor(sel, blocked)
	c.checkShadows(sel, r)
	c.l.roster.Store(r)
	if changedRoster || !sameBlockers(old, r) {
		if old != nil {
			for _, b := range old.Blocked {
				touched = append(touched, b.Name)
			}
		}
		c.l.swapped(touched...)
	}
	c.status.touchAll()
}

// checkShadows warns, once per spec version, about a Shadow policy whose
// target is not an enforcing policy of the roster: it runs beside nothing.
func (c *catalog) checkShadows(sel []*api.SchedulingPolicy, r *Roster) {
	shadowed := map[*Slot]bool{}
	for _, sh := range r.Shadows {
		shadowed[sh] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sp := range sel {
		e := c.entries[sp.Name]
		if e == nil || sp.Spec.Mode != api.ModeShadow || shadowed[e.slot] || e.warnedShadow == sp.ResourceVersion {
			continue
		}
		e.warnedShadow = sp.ResourceVersion
		msg := fmt.Sprintf("shadows %q, which is not an enforcing policy this profile runs: the shadow is compared with nothing", sp.Spec.Shadows)
		c.logger.Info("Shadow policy has no target", "policy", sp.Name, "shadows", sp.Spec.Shadows)
		c.event(sp, nil, v1.EventTypeWarning, "PolicyShadowsNothing", msg)
	}
}

// rosterFor builds the roster of the selected policies, blocking on the
// required ones the store cannot find.
func (c *catalog) rosterFor(sel []*api.SchedulingPolicy, blocked []Blocker) *Roster {
	c.mu.Lock()
	defer c.mu.Unlock()
	var slots []*Slot
	for _, sp := range sel {
		if e := c.entries[sp.Name]; e != nil {
			slots = append(slots, e.slot)
		}
	}
	return NewRoster(slots, blocked)
}

// event posts an Event about a policy on the object the store names for
// it (err, if set, may name a more precise one: the damaged chunk).
func (c *catalog) event(sp *api.SchedulingPolicy, err error, eventType, reason, note string) {
	if ref := c.store.eventRef(sp, err); ref != nil {
		c.events.post(ref, eventType, reason, note)
	}
}

// fetch reads a revision's module from the store.
func (c *catalog) fetch(ctx context.Context, name string, m api.Module) (source.Version, error) {
	return c.store.fetch(ctx, name, m)
}
