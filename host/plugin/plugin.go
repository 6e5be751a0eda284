// Package plugin is the WasmPolicy scheduler plugin: the bridge between the
// kube-scheduler framework and WASM policies. It registers at every
// extension point, keeps each configured policy's current version in a slot
// that reloads swap (slot.go, reload.go, loader.go), pins the versions a
// pod's scheduling cycle starts with for the whole cycle, binding included
// (cycle.go), and hands the decisions to host/compose, which composes the
// policies and applies their failure policies; this package turns its
// verdicts into the framework's statuses (filter.go, score.go, permit.go,
// binding.go) and its observations into metrics, logs and Events
// (observe.go).
//
// It must never let a policy failure crash or stall the scheduler: every
// error from a policy becomes a status on the pod concerned.
package plugin

import (
	"context"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host/compose"
	"github.com/wasmsched/wasmsched/host/policy"
	"github.com/wasmsched/wasmsched/host/skew"
)

// Name is the plugin's name in scheduler configurations.
const Name = compose.Name

// maxEventNote is the longest Event message the API server accepts.
const maxEventNote = 1024

// Plugin is the WasmPolicy plugin. One exists per scheduler profile that
// enables it.
type Plugin struct {
	handle fwk.Handle
	// roster is the policies a cycle runs; SchedulingPolicies change it
	// (catalog.go), static policies never do.
	roster  atomic.Pointer[roster]
	catalog *catalog
	status  *statusWriter
	stop    context.CancelFunc
	// cluster is what policies may read of the cluster, shared with the
	// scheduler's other profiles (context.go); nil without a handle.
	cluster *clusterContext
	// unsubscribe stops cluster object changes from requeueing pods.
	unsubscribe func()
	closed      atomic.Bool
	// waits: pod UID -> *waitSet, the policies a pod parked at Permit waits
	// for.
	waits sync.Map
	// victims is the preemption evaluator for policies choosing victims.
	victims victimSelection
	// rejected is what turned each pending pod away (requeue.go).
	rejected rejections
	// eventRequests memoises the requests of the pods of the event the
	// queue's hints are asked about (requeue.go).
	eventRequests requestsMemo
}

var (
	_ fwk.PreFilterPlugin   = &Plugin{}
	_ fwk.FilterPlugin      = &Plugin{}
	_ fwk.PostFilterPlugin  = &Plugin{}
	_ fwk.PreScorePlugin    = &Plugin{}
	_ fwk.ScorePlugin       = &Plugin{}
	_ fwk.ReservePlugin     = &Plugin{}
	_ fwk.PermitPlugin      = &Plugin{}
	_ fwk.PreBindPlugin     = &Plugin{}
	_ fwk.PostBindPlugin    = &Plugin{}
	_ fwk.EnqueueExtensions = &Plugin{}
	_ fwk.ScoreExtensions   = &Plugin{}
)

// New is the plugin factory registered with the scheduler. It starts every
// policy's source and waits for its first version: a policy that cannot be
// loaded stops the scheduler from starting, naming the policy and why.
// Later versions are loaded and swapped in as the sources deliver them.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := DecodeArgs(obj)
	if err != nil {
		return nil, err
	}
	if h != nil && h.ClientSet() != nil {
		if err := skew.Verify(ctx, h.ClientSet().Discovery()); err != nil {
			return nil, err
		}
	}
	registerMetrics()
	logger := klog.FromContext(ctx).WithName(Name)
	// Sources live until Close, which the framework calls when the
	// scheduler stops.
	runCtx, cancel := context.WithCancel(context.Background())
	pl := &Plugin{handle: h, stop: cancel, cluster: acquireContext(h)}
	pl.unsubscribe = pl.cluster.subscribe(pl)
	pl.trackPods()
	if args.SchedulingPolicies != nil {
		c, err := newCatalog(runCtx, logger, pl, args)
		if err != nil {
			cancel()
			pl.unsubscribe()
			pl.cluster.release()
			return nil, err
		}
		pl.catalog = c
		go publishSelection(runCtx, h, args)
		return pl, nil
	}
	pl.status = newStatusWriter(h, args.Namespace, profileName(h))
	var slots []*Slot
	for _, pa := range args.Policies {
		slot := &Slot{Args: pa, metrics: newPointMetrics(pa.Name), namespace: args.Namespace, recorder: h.EventRecorder(),
			onChange: pl.status.touch, onSwap: pl.requeueRejectedBy, cluster: pl.cluster}
		slot.status = SlotStatus{Policy: pa.Name, Mode: pa.Mode}
		slots = append(slots, slot)
		pl.status.add(slot)
		guestTime.add(slot)
		if err := slot.start(runCtx, logger, newSource(pa, h, args.Namespace)); err != nil {
			cancel()
			retireAll(slots)
			pl.unsubscribe()
			pl.cluster.release()
			return nil, err
		}
	}
	pl.roster.Store(newRoster(slots, nil))
	go pl.status.run(runCtx)
	return pl, nil
}

// roster is the policies of a profile at one moment, in order, with the
// shadow beside each enforcing policy that has one. It is never changed
// once stored: a change stores a new one.
type roster struct {
	slots   []*Slot
	shadows map[*Slot]*Slot
	// blocked are required policies that cannot serve: while any is, pods
	// are refused with its reason.
	blocked []blocker
}

// blocker is a required policy without a version, and why.
type blocker struct {
	name, reason string
}

func newRoster(slots []*Slot, blocked []blocker) *roster {
	r := &roster{slots: slots, shadows: map[*Slot]*Slot{}, blocked: blocked}
	for _, sh := range slots {
		a := sh.args()
		if a.Mode != ModeShadow {
			continue
		}
		for _, e := range slots {
			if e.Args.Name == a.Shadows && e.args().Mode != ModeShadow {
				r.shadows[e] = sh
			}
		}
	}
	return r
}

// version returns the current version of the policy called name in the
// roster, or nil when it has none or is not in it.
func (r *roster) version(name string) *policy.Policy {
	for _, s := range r.slots {
		if s.Args.Name == name {
			return s.Current()
		}
	}
	return nil
}

func (pl *Plugin) currentRoster() *roster {
	if r := pl.roster.Load(); r != nil {
		return r
	}
	return &roster{}
}

// Close stops the policies' sources and status publishing and closes every
// version in use. The framework calls it (io.Closer) when the scheduler
// stops; a scheduler that stops cycles before Close is called never sees a
// closed version.
func (pl *Plugin) Close() error {
	pl.closed.Store(true)
	pl.unsubscribe()
	pl.stop()
	if pl.catalog != nil {
		pl.catalog.close()
	}
	retireAll(pl.currentRoster().slots)
	pl.cluster.release()
	return nil
}

// Name implements fwk.Plugin.
func (pl *Plugin) Name() string { return Name }

// Slots returns the policies the profile runs now, in order.
func (pl *Plugin) Slots() []*Slot { return pl.currentRoster().slots }

// profileName is the scheduler profile the plugin serves.
func profileName(h fwk.Handle) string {
	if h == nil {
		return ""
	}
	return h.ProfileName()
}
