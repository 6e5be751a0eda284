// Package plugin is the WasmPolicy scheduler plugin: the adapter between
// the kube-scheduler framework and WASM policies. It registers at every
// extension point, asks host/lifecycle for the policies of its profile and
// the versions they serve, pins the versions a pod's scheduling cycle
// starts with for the whole cycle, binding included (cycle.go), and hands
// the decisions to host/compose, which composes the policies and applies
// their failure policies; this package turns its verdicts into the
// framework's statuses (filter.go, score.go, permit.go, binding.go) and
// its observations into metrics, logs and Events (observe.go).
//
// It must never let a policy failure crash or stall the scheduler: every
// error from a policy becomes a status on the pod concerned. Where
// policies come from and which version serves is host/lifecycle's
// business, never this package's.
package plugin

import (
	"context"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host/compose"
	"github.com/wasmsched/wasmsched/host/lifecycle"
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
	// lc is the profile's policies and the versions they serve; rosters
	// reads its roster (a fixed one in tests).
	lc      *lifecycle.Lifecycle
	rosters func() *lifecycle.Roster
	// view is the adapter's view of the roster rosters returned last
	// (roster.go); runs keeps each slot's policyRun across rosters.
	view   atomic.Pointer[roster]
	runsMu sync.Mutex
	runs   map[*lifecycle.Slot]*policyRun
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
	// nodeNames remembers the names of the nodes scored last (the batch
	// rescore's candidates; compose.NodeNames).
	nodeNames compose.NodeNames
	// rawScorer is the policy version whose raw scores the scheduler holds
	// from the profile's last scoring cycle (compose.Cycle.RawScorer), for
	// the batch rescores that reuse them (score.go); nil for none.
	rawScorer atomic.Pointer[policy.Policy]
	// registered is the eventSet EventsToRegister gave the framework, with
	// evRegistered set once it did (events.go).
	registered atomic.Uint32
	// groupPods are the last pod-group cycle's pods, converted
	// (group_pods.go).
	groupPods groupPods
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

// New is the plugin factory registered with the scheduler. It starts the
// lifecycle of the profile's policies (host/lifecycle), which waits a
// while for each policy's first version: a policy that cannot serve never
// stops the scheduler, it holds its profile's pods with the reason.
// Broken arguments, a broken client configuration or a version skew with
// the API server do stop it.
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
	pl := &Plugin{handle: h, cluster: acquireContext(h), runs: map[*lifecycle.Slot]*policyRun{}}
	pl.unsubscribe = pl.cluster.subscribe(pl)
	pl.trackPods()
	pl.coverEvents()
	opts := lifecycle.Options{Profile: profileName(h), Bind: pl.cluster.bind, OnSwap: pl.requeueRejectedBy,
		Logger: klog.FromContext(ctx).WithName(Name)}
	if h != nil {
		opts.Client, opts.Config, opts.Recorder = h.ClientSet(), h.KubeConfig(), h.EventRecorder()
		if f := h.SharedInformerFactory(); f != nil {
			// The pod informer's sync says the Event broadcaster runs.
			opts.EventsReady = f.Core().V1().Pods().Informer().HasSynced
		}
	}
	lc, err := lifecycle.Start(args, opts)
	if err != nil {
		pl.unsubscribe()
		pl.cluster.release()
		return nil, err
	}
	pl.lc, pl.rosters = lc, lc.Roster
	return pl, nil
}

// Close stops the lifecycle (sources, loaders, status) and closes every
// version in use. The framework calls it (io.Closer) when the scheduler
// stops; a scheduler that stops cycles before Close is called never sees a
// closed version.
func (pl *Plugin) Close() error {
	pl.closed.Store(true)
	pl.unsubscribe()
	if pl.lc != nil {
		pl.lc.Close()
	}
	pl.cluster.release()
	return nil
}

// Name implements fwk.Plugin.
func (pl *Plugin) Name() string { return Name }

// Roster returns the policies the profile runs now, in order.
func (pl *Plugin) Roster() *lifecycle.Roster { return pl.lcRoster() }

// profileName is the scheduler profile the plugin serves.
func profileName(h fwk.Handle) string {
	if h == nil {
		return ""
	}
	return h.ProfileName()
}
