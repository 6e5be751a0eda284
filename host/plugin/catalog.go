package plugin

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
)

// The catalog: a profile's policies declared as SchedulingPolicy resources.
//
// The catalog watches the SchedulingPolicies of the plugin's namespace
// (a dynamic informer) and keeps the profile's roster in step with those
// its arguments select: a slot per selected policy, created when the
// policy appears, retired when it goes, its weight, failure policy and
// mode changed in place, and each new revision (module, settings, limits:
// api.Revision) fetched and handed to the slot's loader, which validates
// it off the scheduling path and keeps the last good version when it is
// refused (catalog_load.go). Status goes back to the resources
// (catalog_status.go).
//
// One goroutine (run) applies the informer's changes, in order; loads
// report back on their slots' loader goroutines under mu.

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

// catalog is a profile's SchedulingPolicies. Its fields are set once by
// newCatalog, except entries, listErr and started (guarded by mu).
type catalog struct {
	pl        *Plugin
	args      *Args
	client    dynamic.Interface
	namespace string
	replica   string
	logger    klog.Logger
	ctx       context.Context
	selector  labels.Selector // nil: by name

	informer cache.SharedIndexInformer
	changed  chan struct{}
	status   *policyStatusWriter

	mu      sync.Mutex
	eventMu sync.Mutex
	entries map[string]*entry
	listErr error
	// started: the first reconcile is over; entries made before it were
	// made at start-up, when a probation marker left by this replica
	// means its previous process died (catalog_load.go).
	started bool
	wg      sync.WaitGroup
	// held are Events recorded before the scheduler records Events at
	// all (see holdEvents); nil once they are sent.
	held     []heldEvent
	released bool
}

// heldEvent is an Event waiting for the scheduler's recorder to run.
type heldEvent struct {
	sp                      *api.SchedulingPolicy
	eventType, reason, note string
}

// replicaName is this scheduler replica in status: $WASMSCHED_REPLICA,
// else $POD_NAME, else the host name (a pod's name in Kubernetes).
func replicaName() string {
	for _, k := range []string{"WASMSCHED_REPLICA", "POD_NAME"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	h, _ := os.Hostname()
	return h
}

// newCatalog starts watching and waits (up to startupTimeout) for the
// first version of each selected policy, or its failure: a policy never
// stops the scheduler from starting. Only a broken client configuration
// does.
func newCatalog(ctx context.Context, logger klog.Logger, pl *Plugin, args *Args) (*catalog, error) {
	h := pl.handle
	if h == nil || h.KubeConfig() == nil {
		return nil, fmt.Errorf("%s: schedulingPolicies need the scheduler's client", Name)
	}
	client, err := dynamic.NewForConfig(h.KubeConfig())
	if err != nil {
		return nil, fmt.Errorf("%s: dynamic client: %w", Name, err)
	}
	c := &catalog{pl: pl, args: args, client: client, namespace: args.Namespace, replica: replicaName(),
		logger: logger.WithValues("namespace", args.Namespace), ctx: ctx,
		changed: make(chan struct{}, 1), entries: map[string]*entry{}}
	if sel := args.SchedulingPolicies.Selector; sel != nil {
		c.selector, _ = metav1.LabelSelectorAsSelector(sel) // validated by DecodeArgs
	}
	c.status = newPolicyStatusWriter(c)
	pl.roster.Store(newRoster(nil, nil))

	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, catalogResync, c.namespace, nil)
	c.informer = factory.ForResource(api.GVR).Informer()
	_, _ = c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.poke() },
		UpdateFunc: func(_, _ any) { c.poke() },
		DeleteFunc: func(any) { c.poke() },
	})
	_ = c.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		c.mu.Lock()
		c.listErr = err
		c.mu.Unlock()
		c.poke()
	})
	factory.Start(ctx.Done())
	go func() { <-ctx.Done(); factory.Shutdown() }()

	startup, cancelStartup := context.WithTimeout(ctx, startupTimeout)
	defer cancelStartup()
	synced := cache.WaitForCacheSync(startup.Done(), c.informer.HasSynced)
	if !synced {
		c.mu.Lock()
		err := c.listErr
		c.mu.Unlock()
		logger.Error(err, "SchedulingPolicies not listed yet: the profile starts without them and keeps trying (is the CRD installed? manifests/crd.yaml)",
			"namespace", c.namespace)
	}
	c.reconcile()
	c.mu.Lock()
	c.started = true
	var waits []<-chan struct{}
	for _, e := range c.entries {
		waits = append(waits, e.settled)
	}
	c.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-startup.Done():
		}
	}
	c.wg.Add(3)
	go func() { defer c.wg.Done(); c.releaseEvents() }()
	go func() { defer c.wg.Done(); c.run() }()
	go func() { defer c.wg.Done(); c.status.run(ctx) }()
	return c, nil
}

func (c *catalog) poke() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// run applies changes until the plugin closes.
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

// close stops the catalog's goroutines and clears this replica's
// probation marks: a scheduler stopped on purpose did not die of its
// policies. The plugin's context is already cancelled.
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
		_ = c.status.update(ctx, name, func(sp *api.SchedulingPolicy) {
			c.setReplica(sp, func(r *api.ReplicaStatus) { r.Probation = nil })
		})
	}
	for _, e := range entries {
		e.cancel()
	}
}

// selected returns the policies the arguments select, in order, and the
// named ones that do not exist.
func (c *catalog) selected() ([]*api.SchedulingPolicy, []string) {
	byName := map[string]*api.SchedulingPolicy{}
	for _, obj := range c.informer.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		sp, err := api.FromUnstructured(u)
		if err != nil {
			c.logger.Error(err, "Ignoring a SchedulingPolicy that does not decode")
			continue
		}
		byName[sp.Name] = sp
	}
	var out []*api.SchedulingPolicy
	var missing []string
	if c.selector == nil {
		for _, n := range c.args.SchedulingPolicies.Names {
			if sp := byName[n]; sp != nil {
				out = append(out, sp)
			} else {
				missing = append(missing, n)
			}
		}
		return out, missing
	}
	for _, sp := range byName {
		if c.selector.Matches(labels.Set(sp.Labels)) {
			out = append(out, sp)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Spec.Order != out[j].Spec.Order {
			return out[i].Spec.Order < out[j].Spec.Order
		}
		return out[i].Name < out[j].Name
	})
	return out, missing
}

// reconcile brings the entries and the roster in line with the resources.
func (c *catalog) reconcile() {
	sel, missing := c.selected()
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
	old := c.pl.roster.Load()
	r := c.rosterFor(sel, missing)
	c.checkShadows(sel, r)
	c.pl.roster.Store(r)
	if changedRoster || !sameBlockers(old, r) {
		if old != nil {
			for _, b := range old.blocked {
				touched = append(touched, b.name)
			}
		}
		c.pl.requeueRejectedBy(touched...)
	}
	c.status.touchAll()
}

// checkShadows warns, once per spec version, about a Shadow policy whose
// target is not an enforcing policy of the roster: it runs beside nothing.
func (c *catalog) checkShadows(sel []*api.SchedulingPolicy, r *roster) {
	shadowed := map[*Slot]bool{}
	for _, sh := range r.shadows {
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
		c.event(sp, v1.EventTypeWarning, "PolicyShadowsNothing", msg)
	}
}

func sameBlockers(a, b *roster) bool {
	if a == nil || len(a.blocked) != len(b.blocked) {
		return false
	}
	for i := range a.blocked {
		if a.blocked[i] != b.blocked[i] {
			return false
		}
	}
	return true
}

// rosterFor builds the roster of the selected policies, blocking on the
// named ones that do not exist (or cannot be listed).
func (c *catalog) rosterFor(sel []*api.SchedulingPolicy, missing []string) *roster {
	c.mu.Lock()
	defer c.mu.Unlock()
	var slots []*Slot
	for _, sp := range sel {
		if e := c.entries[sp.Name]; e != nil {
			slots = append(slots, e.slot)
		}
	}
	var blocked []blocker
	for _, n := range missing {
		why := fmt.Sprintf("SchedulingPolicy %s/%s does not exist", c.namespace, n)
		if c.listErr != nil && !c.informer.HasSynced() {
			why = fmt.Sprintf("SchedulingPolicies in %s cannot be listed: %v", c.namespace, c.listErr)
		}
		blocked = append(blocked, blocker{name: n, reason: why})
	}
	return newRoster(slots, blocked)
}

// event posts an Event on a SchedulingPolicy. The reference carries the
// resource version, so each spec change starts its own Event series and
// the message shown is the one about that spec, not the first ever.
func (c *catalog) event(sp *api.SchedulingPolicy, eventType, reason, note string) {
	if c.pl.handle == nil || c.pl.handle.EventRecorder() == nil {
		return
	}
	c.eventMu.Lock()
	if !c.released {
		c.held = append(c.held, heldEvent{sp: sp, eventType: eventType, reason: reason, note: note})
		c.eventMu.Unlock()
		return
	}
	c.eventMu.Unlock()
	ref := &v1.ObjectReference{APIVersion: api.GroupVersion.String(), Kind: api.Kind, Namespace: sp.Namespace, Name: sp.Name,
		UID: sp.UID, ResourceVersion: sp.ResourceVersion}
	if len(note) > maxEventNote {
		note = note[:maxEventNote-4] + " ..."
	}
	c.pl.handle.EventRecorder().Eventf(ref, nil, eventType, reason, "Load", "%s", note)
}

// releaseEvents sends the Events held since start-up once the scheduler
// records Events: kube-scheduler starts its Event broadcaster after it
// has made the plugins and before it starts its informers, so Events
// recorded while New runs (a fallback, a quarantine) would be dropped.
// The pod informer's sync says the broadcaster runs; after two minutes
// they are sent anyway.
func (c *catalog) releaseEvents() {
	deadline := time.Now().Add(2 * time.Minute)
	f := c.pl.handle.SharedInformerFactory()
	for f != nil && time.Now().Before(deadline) && !f.Core().V1().Pods().Informer().HasSynced() {
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	c.eventMu.Lock()
	held := c.held
	c.held, c.released = nil, true
	c.eventMu.Unlock()
	for _, e := range held {
		c.event(e.sp, e.eventType, e.reason, e.note)
	}
}

// get returns the resource as the informer holds it.
func (c *catalog) get(name string) (*api.SchedulingPolicy, bool) {
	obj, ok, err := c.informer.GetStore().GetByKey(c.namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, false
	}
	sp, err := api.FromUnstructured(u)
	return sp, err == nil
}
