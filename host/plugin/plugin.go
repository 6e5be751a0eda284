// Package plugin is the WasmPolicy scheduler plugin: the bridge between the
// kube-scheduler framework and WASM policies. It registers at every
// extension point, pins the policy versions a pod's scheduling cycle starts
// with for the whole cycle (binding included), composes several policies
// (Filter passes only if all pass, Score is the weighted sum normalised by
// the total weight, Permit allows only if all allow) and applies each
// policy's failurePolicy, also to a guest's own Error verdicts.
//
// It must never let a policy failure crash or stall the scheduler: every
// error from a policy becomes a status on the pod concerned.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/convert"
	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/policy"
)

// Name is the plugin's name in scheduler configurations.
const Name = "WasmPolicy"

// maxEventNote is the longest Event message the API server accepts.
const maxEventNote = 1024

// maxPermitWait bounds how long a pod may wait at Permit.
const maxPermitWait = 15 * time.Minute

// Plugin is the WasmPolicy plugin. One exists per scheduler profile that
// enables it.
type Plugin struct {
	handle fwk.Handle
	slots  []*Slot
	// shadows maps an enforcing slot to the shadow slot beside it.
	shadows map[*Slot]*Slot
	status  *statusWriter
	stop    context.CancelFunc
	// waits: pod UID -> *waitSet, the policies a pod parked at Permit waits
	// for.
	waits sync.Map
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

// Slot is one configured policy and the version it currently runs. The
// version can be swapped at any time (hot reload); a cycle keeps the
// version it started with.
//
// Its methods are safe for concurrent use.
type Slot struct {
	Args    PolicyArgs
	current atomic.Pointer[policy.Policy]
	metrics map[abiv1.Point]*pointMetrics

	// lastFilter is the entry of the last cycle that ran this policy's
	// Filter; filterShare is 1 + the share of the snapshot (thousandths)
	// the scheduler asked Filter about, averaged over recent cycles, 0
	// before the first. See batchFilters.
	lastFilter  atomic.Pointer[entry]
	filterShare atomic.Int64

	namespace string
	recorder  events.EventRecorder
	onChange  func()
	// onSwap runs after a new version (or none) replaced a served one.
	onSwap func()

	// load hands versions from the source to the loader goroutine
	// (loader.go).
	load loader

	mu     sync.Mutex
	status SlotStatus
}

// Current returns the version the slot runs now.
func (s *Slot) Current() *policy.Policy { return s.current.Load() }

// Swap installs a new version and returns the previous one.
func (s *Slot) Swap(p *policy.Policy) *policy.Policy {
	old := s.current.Swap(p)
	if old != nil {
		activeVersion.DeleteLabelValues(s.Args.Name, old.Digest())
	}
	if p != nil {
		activeVersion.WithLabelValues(s.Args.Name, p.Digest()).Set(1)
	}
	return old
}

// New is the plugin factory registered with the scheduler. It starts every
// policy's source and waits for its first version: a policy that cannot be
// loaded stops the scheduler from starting, naming the policy and why.
// Later versions are loaded and swapped in as the sources deliver them.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := DecodeArgs(obj)
	if err != nil {
		return nil, err
	}
	registerMetrics()
	logger := klog.FromContext(ctx).WithName(Name)
	// Sources live until Close, which the framework calls when the
	// scheduler stops.
	runCtx, cancel := context.WithCancel(context.Background())
	pl := &Plugin{handle: h, stop: cancel}
	pl.status = newStatusWriter(h, args.Namespace, profileName(h))
	for _, pa := range args.Policies {
		slot := &Slot{Args: pa, metrics: newPointMetrics(pa.Name), namespace: args.Namespace, recorder: h.EventRecorder(),
			onChange: pl.status.touch, onSwap: pl.requeue}
		slot.status = SlotStatus{Policy: pa.Name, Mode: pa.Mode}
		pl.slots = append(pl.slots, slot)
		pl.status.add(slot)
		guestTime.add(slot)
		if err := slot.start(runCtx, logger, newSource(pa, h, args.Namespace)); err != nil {
			cancel()
			retireAll(pl.slots)
			return nil, err
		}
	}
	pl.shadows = map[*Slot]*Slot{}
	for _, sh := range pl.slots {
		if sh.Args.Mode != ModeShadow {
			continue
		}
		for _, e := range pl.slots {
			if e.Args.Name == sh.Args.Shadows {
				pl.shadows[e] = sh
			}
		}
	}
	go pl.status.run(runCtx)
	return pl, nil
}

// Close stops the policies' sources and status publishing and closes every
// version in use. The framework calls it (io.Closer) when the scheduler
// stops; a scheduler that stops cycles before Close is called never sees a
// closed version.
func (pl *Plugin) Close() error {
	pl.stop()
	retireAll(pl.slots)
	return nil
}

// profileName is the scheduler profile the plugin serves.
func profileName(h fwk.Handle) string {
	if h == nil {
		return ""
	}
	return h.ProfileName()
}

// requeue moves this profile's pending pods back to the active queue after a
// policy changed: a verdict of the old version may not hold any more, and
// no cluster event would otherwise retry them before the periodic flush.
func (pl *Plugin) requeue() {
	pods, err := pl.handle.SharedInformerFactory().Core().V1().Pods().Lister().List(labels.Everything())
	if err != nil {
		return
	}
	pending := map[string]*v1.Pod{}
	for _, p := range pods {
		if p.Spec.NodeName == "" && p.Spec.SchedulerName == pl.handle.ProfileName() && p.DeletionTimestamp == nil {
			pending[p.Namespace+"/"+p.Name] = p
		}
	}
	if len(pending) > 0 {
		pl.handle.Activate(klog.Background(), pending)
	}
}

// loadVersion compiles, validates and starts a policy version. ctx bounds
// the load (policy.Load); stage, if set, is told each stage as it begins.
func loadVersion(ctx context.Context, logger klog.Logger, pa PolicyArgs, wasm []byte, stage func(string)) (*policy.Policy, error) {
	start := time.Now()
	cfg := pa.engineConfig()
	name := pa.Name
	cfg.Log = func(level int32, msg string) {
		switch {
		case level >= 8:
			logger.Error(nil, msg, "policy", name)
		case level >= 4:
			logger.V(4).Info(msg, "policy", name)
		default:
			logger.Info(msg, "policy", name)
		}
	}
	p, err := policy.Load(ctx, policy.Options{Name: name, Wasm: wasm, Settings: pa.Settings, Engine: cfg, MaxInstances: pa.MaxInstances, Stage: stage})
	if err != nil {
		if ctx.Err() != nil {
			// Superseded or shut down: the caller says which.
			logger.V(2).Info("Policy load abandoned", "policy", name, "duration", time.Since(start))
			return nil, err
		}
		logger.Error(err, "Policy rejected", "policy", name)
		return nil, err
	}
	logger.Info("Policy loaded", "policy", name, "digest", p.Digest(), "points", pointList(p), "wantsPods", p.Info().WantsPods,
		"wantsAllNodes", p.Info().WantsAllNodes, "duration", time.Since(start))
	return p, nil
}

func pointList(p *policy.Policy) string {
	var out []string
	for pt := abiv1.Point_POINT_PRE_FILTER; pt <= abiv1.Point_POINT_POST_BIND; pt++ {
		if p.Implements(pt) {
			out = append(out, engine.PointName(pt))
		}
	}
	return strings.Join(out, ",")
}

// Slots returns the configured policies, in order.
func (pl *Plugin) Slots() []*Slot { return pl.slots }

// Name implements fwk.Plugin.
func (pl *Plugin) Name() string { return Name }

// stateKey is where a cycle's state lives in CycleState.
const stateKey fwk.StateKey = Name

// cycleState is what a scheduling cycle pins: the cycle, the policy
// versions, and what each policy decided along the way. Binding reads the
// same state, so a pod is judged by one version of each policy throughout.
type cycleState struct {
	cycle      *policy.Cycle
	entries    []*entry
	scoreOrder scoredNodes
	// reserved is a private copy of the chosen node taken at Reserve, for
	// the binding phase, which must not read the scheduler's snapshot (the
	// next cycle rewrites it in place).
	reserved fwk.NodeInfo
	// reasons bounds the Filter reasons of the cycle (see MaxPodReasons).
	reasons reasonBudget
}

// scoredNodes are the names of the nodes PreScore was given, in order. The
// framework passes Score one of them at a time and NormalizeScore all of
// them, in the same order; index finds a node's position from its name.
type scoredNodes struct {
	names  []string
	once   sync.Once
	byName map[string]int // built on the first lookup that the order does not answer
}

// index returns the position of the named node among PreScore's nodes; k is
// where it is expected (-1: anywhere).
func (sn *scoredNodes) index(k int, name string) (int, bool) {
	if k >= 0 && k < len(sn.names) && sn.names[k] == name {
		return k, true
	}
	sn.once.Do(func() {
		sn.byName = make(map[string]int, len(sn.names))
		for i, n := range sn.names {
			sn.byName[n] = i
		}
	})
	i, ok := sn.byName[name]
	return i, ok
}

type entry struct {
	slot    *Slot
	version *policy.Policy
	// pod is the pod of the cycle, for the Event a skipped policy posts.
	pod *v1.Pod
	// ignored: the policy failed with failurePolicy Ignore and is skipped
	// for the rest of the cycle.
	ignored atomic.Bool
	// skipFilter: PreFilter returned Skip.
	skipFilter bool
	scores     []int64
	// filterOnce runs the cycle's Filter calls as one batch on the first
	// Filter (policy.FilterAll); verdicts holds them, nil if the batch
	// failed, in which case Filter calls the policy node by node and meets
	// the failure there.
	filterOnce sync.Once
	verdicts   *policy.Verdicts
	// asked counts the scheduler's Filter calls in the cycle, of nodes
	// in its snapshot.
	asked atomic.Int64
	nodes int
	// scored: PreScore computed every score in one batch (ScoreAll);
	// normalized: the guest normalised them in the same call.
	scored, normalized bool
	// shadow is the shadow policy compared with this one, if any.
	shadow *entry
	// For a shadow entry: its PreFilter, run once per cycle.
	preFilterOnce sync.Once
	shadowSkip    bool
	shadowPre     *policy.Status
}

// bindingCalls reports whether a policy of the cycle is called after the
// scheduling cycle (Unreserve, PreBind, PostBind), on the reserved copy.
func (s *cycleState) bindingCalls() bool {
	for _, e := range s.entries {
		for _, pt := range []abiv1.Point{abiv1.Point_POINT_UNRESERVE, abiv1.Point_POINT_PRE_BIND, abiv1.Point_POINT_POST_BIND} {
			if e.version.Implements(pt) {
				return true
			}
		}
	}
	return false
}

// Clone implements fwk.StateData. The state is shared by clones: it is
// immutable after PreFilter except for per-node score slots written at
// distinct indices, the ignored flags and the reason budget.
func (s *cycleState) Clone() fwk.StateData { return s }

func getState(cs fwk.CycleState) (*cycleState, error) {
	d, err := cs.Read(stateKey)
	if err != nil {
		return nil, fmt.Errorf("%s: no cycle state (PreFilter did not run): %w", Name, err)
	}
	return d.(*cycleState), nil
}

func (e *entry) implements(pt abiv1.Point) bool {
	return !e.ignored.Load() && e.version.Implements(pt)
}

// failed applies the failure policy to a call error. It returns the status
// to report, or nil when the policy is to be ignored.
func (pl *Plugin) failed(ctx context.Context, e *entry, pt abiv1.Point, err error) *fwk.Status {
	if abandoned(ctx, err) {
		// The scheduler abandoned the cycle (another node or plugin failed)
		// while this call waited for an instance: not the policy's failure.
		return fwk.AsStatus(err)
	}
	m := e.slot.metrics[pt]
	kind := countFailure(ctx, e, pt, err, "Policy call failed")
	if e.slot.Args.FailurePolicy == FailurePolicyIgnore {
		if e.ignored.CompareAndSwap(false, true) {
			skipsTotal.WithLabelValues(e.slot.Args.Name, engine.PointName(pt), kind).Inc()
			if e.pod != nil && e.slot.recorder != nil {
				msg := fmt.Sprintf("%s: policy failed and was skipped for this attempt (failurePolicy Ignore): %v", e.slot.Args.Name, err)
				if len(msg) > maxEventNote { // what the API server accepts
					msg = msg[:maxEventNote-4] + " ..."
				}
				e.slot.recorder.Eventf(e.pod, nil, v1.EventTypeWarning, "PolicySkipped", "Scheduling", "%s", msg)
			}
		}
		m.skipped.Inc()
		return nil
	}
	m.errors.Inc()
	return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: policy failed (failurePolicy Fail): %v", e.slot.Args.Name, err))
}

// countFailure counts and logs a failed call, and returns its kind.
func countFailure(ctx context.Context, e *entry, pt abiv1.Point, err error, msg string) string {
	kind := "error"
	var ce *engine.CallError
	if errors.As(err, &ce) {
		kind = string(ce.Kind)
	}
	errorsTotal.WithLabelValues(e.slot.Args.Name, engine.PointName(pt), kind).Inc()
	klog.FromContext(ctx).Error(err, msg, "policy", e.slot.Args.Name, "digest", e.version.Digest(), "point", engine.PointName(pt), "kind", kind, "failurePolicy", e.slot.Args.FailurePolicy)
	return kind
}

// guestFailure turns a guest's own Error verdict into a call error, so that
// the failure policy applies to it as to a trap.
func guestFailure(e *entry, pt abiv1.Point, s policy.Status) error {
	if s.Code != abiv1.Code_CODE_ERROR {
		return nil
	}
	return &engine.CallError{Policy: e.slot.Args.Name, Version: e.version.Version(), Call: engine.PointName(pt), Kind: engine.KindGuest,
		Err: fmt.Errorf("policy reported an error: %s", strings.Join(s.Reasons, "; "))}
}

// toStatus converts a guest verdict.
func toStatus(s policy.Status) *fwk.Status {
	switch s.Code {
	case abiv1.Code_CODE_SUCCESS:
		return nil
	case abiv1.Code_CODE_UNSCHEDULABLE:
		return fwk.NewStatus(fwk.Unschedulable, s.Reasons...)
	case abiv1.Code_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE:
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, s.Reasons...)
	case abiv1.Code_CODE_WAIT:
		return fwk.NewStatus(fwk.Wait, s.Reasons...)
	case abiv1.Code_CODE_SKIP:
		return fwk.NewStatus(fwk.Skip, s.Reasons...)
	case abiv1.Code_CODE_PENDING:
		return fwk.NewStatus(fwk.Pending, s.Reasons...)
	}
	return fwk.NewStatus(fwk.Error, s.Reasons...)
}

// PreFilter pins the policy versions for the cycle, starts the cycle in
// each policy (which runs the guests' PreFilter) and merges their node
// restrictions.
func (pl *Plugin) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	st := &cycleState{cycle: policy.NewCycle(pod, nodes)}
	for _, s := range pl.slots {
		if s.Args.Mode == ModeShadow {
			continue
		}
		v := s.Current()
		if v == nil {
			continue // deactivated
		}
		e := &entry{slot: s, version: v, pod: pod}
		if sh := pl.shadows[s]; sh != nil {
			if sv := sh.Current(); sv != nil {
				e.shadow = &entry{slot: sh, version: sv}
			}
		}
		st.entries = append(st.entries, e)
	}
	cs.Write(stateKey, st)

	var (
		restricted sets.Set[string]
		anyFilter  bool
	)
	for _, e := range st.entries {
		needsCycle := e.version.Implements(abiv1.Point_POINT_PRE_FILTER) || e.version.Info().WantsAllNodes
		if !needsCycle {
			anyFilter = anyFilter || e.version.Implements(abiv1.Point_POINT_FILTER)
			continue
		}
		res, err := timed(e, abiv1.Point_POINT_PRE_FILTER, func() (policy.PreFilterResult, error) { return e.version.PreFilter(ctx, st.cycle) })
		if err == nil {
			err = guestFailure(e, abiv1.Point_POINT_PRE_FILTER, res.Status)
		}
		if err != nil {
			if s := pl.failed(ctx, e, abiv1.Point_POINT_PRE_FILTER, err); s != nil {
				return nil, s.WithPlugin(Name)
			}
			continue
		}
		switch res.Status.Code {
		case abiv1.Code_CODE_SUCCESS:
		case abiv1.Code_CODE_SKIP:
			e.skipFilter = true
			continue
		default:
			return nil, toStatus(res.Status).WithPlugin(Name)
		}
		anyFilter = anyFilter || e.version.Implements(abiv1.Point_POINT_FILTER)
		if res.Restricted {
			set := sets.New(res.NodeNames...)
			if restricted == nil {
				restricted = set
			} else {
				restricted = restricted.Intersection(set)
			}
		}
	}
	if !anyFilter && restricted == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if restricted != nil {
		return &fwk.PreFilterResult{NodeNames: restricted}, nil
	}
	return nil, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin.
func (pl *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter passes a node only if every policy passes it, in order. The
// reasons it returns for a pod's nodes are bounded by the cycle's budget.
func (pl *Plugin) Filter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	st, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	for _, e := range st.entries {
		if e.skipFilter || !e.implements(abiv1.Point_POINT_FILTER) {
			continue
		}
		e.asked.Add(1)
		s, err := timed(e, abiv1.Point_POINT_FILTER, func() (policy.Status, error) {
			if s, ok := batchFilter(ctx, st, e).Lookup(ni); ok {
				return s, nil
			}
			return e.version.Filter(ctx, st.cycle, ni)
		})
		if err == nil {
			err = guestFailure(e, abiv1.Point_POINT_FILTER, s)
		}
		if e.shadow != nil {
			pl.compareShadow(ctx, st, e, ni, s, err)
		}
		if err != nil {
			if abandoned(ctx, err) {
				// The scheduler found enough feasible nodes and stopped
				// filtering while this call waited: an Error here would
				// fail the whole cycle of a pod that has its nodes.
				return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: node not evaluated: the scheduler stopped filtering (%v)", e.slot.Args.Name, ctx.Err()))
			}
			if fs := pl.failed(ctx, e, abiv1.Point_POINT_FILTER, err); fs != nil {
				return st.reasons.limit(ctx, e, fs)
			}
			continue
		}
		if !s.IsSuccess() {
			return st.reasons.limit(ctx, e, toStatus(s))
		}
	}
	return nil
}

// abandoned reports whether err is the scheduler cancelling ctx, not a
// failure of the call.
func abandoned(ctx context.Context, err error) bool {
	return ctx.Err() != nil && errors.Is(err, ctx.Err())
}

// batchFilter returns the cycle's Filter verdicts of e's policy on the
// snapshot, judging every node in one batch on the first call, or nil when
// batching does not pay (see batchFilters). The other Filter goroutines wait
// for it: they would otherwise queue for the same few instances. Nodes the
// batch did not judge at their current generation (preemption's modified
// copies) are filtered one by one.
func batchFilter(ctx context.Context, st *cycleState, e *entry) *policy.Verdicts {
	e.filterOnce.Do(func() {
		if len(st.cycle.Nodes) == 0 || !e.slot.batchFilters(e, len(st.cycle.Nodes)) {
			return
		}
		v, err := e.version.FilterAll(ctx, st.cycle, st.cycle.Nodes)
		if err != nil {
			// A failed call is counted and logged wherever it happens;
			// the failure policy applies when Filter meets the failure
			// again node by node (an intermittent one it may not meet).
			if !abandoned(ctx, err) {
				countFailure(ctx, e, abiv1.Point_POINT_FILTER, err, "Batched Filter failed, filtering node by node")
			}
			return
		}
		e.verdicts = v
	})
	return e.verdicts
}

// batchFilters records that e's cycle filters, over nodes snapshot nodes,
// folds the share of its snapshot that the previous filtering cycle asked
// about into the slot's average, and reports whether e's cycle should
// filter in one batch: while the scheduler asks about at least half of the
// nodes. A batch judges every node, one call costing less than half of a
// call made alone (no waiting for an instance); when other plugins reject
// most nodes before this one (NodeResourcesFit rejects the nodes without
// GPUs for a GPU pod) or the scheduler stops early, node by node is cheaper.
// It runs once per filtering cycle, and cycles run one at a time.
func (s *Slot) batchFilters(e *entry, nodes int) bool {
	e.nodes = nodes
	prev := s.lastFilter.Swap(e)
	share := s.filterShare.Load() - 1
	if prev != nil && prev.nodes > 0 {
		sample := min(1000, prev.asked.Load()*1000/int64(prev.nodes))
		if share < 0 {
			share = sample
		} else {
			share = (3*share + sample) / 4
		}
		s.filterShare.Store(share + 1)
	}
	return share < 0 || share >= 500
}

// PostFilter gives policies that export it a say when no node fits; the
// first nomination wins.
func (pl *Plugin) PostFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	st, err := getState(cs)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	var statuses []policy.NodeStatus
	collected := false
	for _, e := range st.entries {
		if !e.implements(abiv1.Point_POINT_POST_FILTER) {
			continue
		}
		if !collected {
			collected = true
			all, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
			if err != nil {
				return nil, fwk.AsStatus(err)
			}
			for _, ni := range all {
				s := m.Get(ni.Node().Name)
				ps := policy.Status{Code: abiv1.Code_CODE_UNSCHEDULABLE, Reasons: s.Reasons()}
				if s.Code() == fwk.UnschedulableAndUnresolvable {
					ps.Code = abiv1.Code_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE
				}
				statuses = append(statuses, policy.NodeStatus{Node: ni, Status: ps})
			}
		}
		nominated, s, err := e.version.PostFilter(ctx, st.cycle, statuses)
		if err != nil {
			if fs := pl.failed(ctx, e, abiv1.Point_POINT_POST_FILTER, err); fs != nil {
				return nil, fs
			}
			continue
		}
		if nominated != "" && s.IsSuccess() {
			return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatedNodeName: nominated, NominatingMode: fwk.ModeOverride}}, nil
		}
	}
	return nil, fwk.NewStatus(fwk.Unschedulable)
}

// PreScore skips scoring when no policy scores.
func (pl *Plugin) PreScore(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	st, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	any := false
	for _, e := range st.entries {
		if e.implements(abiv1.Point_POINT_SCORE) {
			any = true
			e.scores = make([]int64, len(nodes))
		}
	}
	if !any {
		return fwk.NewStatus(fwk.Skip)
	}
	st.scoreOrder.names = make([]string, len(nodes))
	for i, ni := range nodes {
		st.scoreOrder.names[i] = ni.Node().Name
	}
	// Score every node in one batch; if that fails, Score calls the policy
	// node by node and meets the failure there. The batch counts as one
	// observation of the score duration and as one call per node.
	for _, e := range st.entries {
		if e.scores == nil {
			continue
		}
		m := e.slot.metrics[abiv1.Point_POINT_SCORE]
		start := time.Now()
		res, err := e.version.ScoreAll(ctx, st.cycle, nodes)
		if err != nil || res.Bad >= 0 {
			// As for Filter: a failed call is counted and logged here,
			// and the failure policy applies node by node.
			if err != nil && !abandoned(ctx, err) {
				countFailure(ctx, e, abiv1.Point_POINT_SCORE, err, "Batched Score failed, scoring node by node")
			}
			continue
		}
		m.duration.Observe(time.Since(start).Seconds())
		m.success.Add(float64(len(nodes)))
		copy(e.scores, res.Values)
		e.scored, e.normalized = true, res.Normalized
		if res.Normalized && e.version.Implements(abiv1.Point_POINT_NORMALIZE_SCORE) {
			e.slot.metrics[abiv1.Point_POINT_NORMALIZE_SCORE].success.Inc()
		}
	}
	return nil
}

// Score records each scoring policy's raw score for the node; the combined
// score is computed in NormalizeScore.
func (pl *Plugin) Score(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	st, err := getState(cs)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	i := -1
	for _, e := range st.entries {
		if e.scores == nil || e.scored || !e.implements(abiv1.Point_POINT_SCORE) {
			continue
		}
		if i < 0 {
			var ok bool
			if i, ok = st.scoreOrder.index(-1, ni.Node().Name); !ok {
				return 0, fwk.AsStatus(fmt.Errorf("%s: node %s was not passed to PreScore", Name, ni.Node().Name))
			}
		}
		type result struct {
			v int64
			s policy.Status
		}
		r, err := timed(e, abiv1.Point_POINT_SCORE, func() (result, error) {
			v, s, err := e.version.Score(ctx, st.cycle, ni)
			return result{v, s}, err
		})
		if err == nil && !r.s.IsSuccess() {
			err = &engine.CallError{Policy: e.slot.Args.Name, Version: e.version.Version(), Call: "score", Kind: engine.KindRejected,
				Err: fmt.Errorf("%s %v", policy.CodeName(r.s.Code), r.s.Reasons)}
		}
		if err != nil {
			if fs := pl.failed(ctx, e, abiv1.Point_POINT_SCORE, err); fs != nil {
				return 0, fwk.AsStatus(errors.New(fs.Message()))
			}
			continue
		}
		e.scores[i] = r.v
	}
	return 0, nil
}

// ScoreExtensions implements fwk.ScorePlugin.
func (pl *Plugin) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore normalises each policy's scores (through the guest when it
// exports NormalizeScore) and combines them: the weighted sum divided by the
// total weight, so the result stays in 0..100 and the plugin's own weight in
// the profile scales it against the other plugins.
func (pl *Plugin) NormalizeScore(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	st, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	totals := make([]int64, len(scores))
	var weights int64
	// at[k] is the index into entry.scores of scores[k]'s node.
	var at []int
	for _, e := range st.entries {
		if e.scores == nil || !e.implements(abiv1.Point_POINT_SCORE) {
			continue
		}
		if at == nil {
			at = make([]int, len(scores))
			for k, ns := range scores {
				i, ok := st.scoreOrder.index(k, ns.Name)
				if !ok {
					return fwk.AsStatus(fmt.Errorf("%s: node %s was not passed to PreScore", Name, ns.Name))
				}
				at[k] = i
			}
		}
		// Scores normalised in PreScore's batch are final already.
		normalize := e.version.Implements(abiv1.Point_POINT_NORMALIZE_SCORE) && !e.normalized
		ps := make([]policy.NodeScore, len(scores))
		var infos []fwk.NodeInfo
		if normalize {
			infos = make([]fwk.NodeInfo, len(scores))
		}
		for k, ns := range scores {
			ps[k] = policy.NodeScore{Name: ns.Name, Score: e.scores[at[k]]}
			if normalize {
				ni, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(ns.Name)
				if err != nil {
					return fwk.AsStatus(err)
				}
				infos[k] = ni
			}
		}
		if normalize {
			s, err := timed(e, abiv1.Point_POINT_NORMALIZE_SCORE, func() (policy.Status, error) {
				return e.version.NormalizeScore(ctx, st.cycle, infos, ps)
			})
			if err == nil && !s.IsSuccess() {
				err = fmt.Errorf("%s: normalize_score: %s %v", e.slot.Args.Name, policy.CodeName(s.Code), s.Reasons)
			}
			if err != nil {
				if fs := pl.failed(ctx, e, abiv1.Point_POINT_NORMALIZE_SCORE, err); fs != nil {
					return fwk.AsStatus(errors.New(fs.Message()))
				}
				continue
			}
		}
		var outOfRange error
		for _, s := range ps {
			if s.Score < fwk.MinNodeScore || s.Score > fwk.MaxNodeScore {
				outOfRange = &engine.CallError{Policy: e.slot.Args.Name, Version: e.version.Version(), Call: "score", Kind: engine.KindInvalid,
					Err: fmt.Errorf("%d for node %s is outside %d..%d", s.Score, s.Name, fwk.MinNodeScore, fwk.MaxNodeScore)}
				break
			}
		}
		if outOfRange != nil {
			if fs := pl.failed(ctx, e, abiv1.Point_POINT_SCORE, outOfRange); fs != nil {
				return fwk.AsStatus(errors.New(fs.Message()))
			}
			continue // ignored: this policy does not count for this pod
		}
		for k, s := range ps {
			totals[k] += e.slot.Args.Weight * s.Score
		}
		weights += e.slot.Args.Weight
	}
	for k := range scores {
		if weights > 0 {
			scores[k].Score = totals[k] / weights
		} else {
			scores[k].Score = 0
		}
	}
	return nil
}

// Reserve keeps a copy of the chosen node for the binding phase and tells
// policies that export Reserve which node the pod got.
func (pl *Plugin) Reserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	st, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	// Only the binding phase needs the copy; most policies have no calls
	// there, and copying a node with its pods costs every pod.
	if st.bindingCalls() {
		ni, err := pl.nodeInfo(nodeName, pod)
		if err != nil {
			return fwk.AsStatus(err)
		}
		st.reserved = ni.Snapshot()
	}
	return pl.nodeCall(ctx, cs, abiv1.Point_POINT_RESERVE, nodeName)
}

// Unreserve tells policies the reservation was undone; they may reject
// other pods waiting at Permit (a gang releasing its members).
func (pl *Plugin) Unreserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) {
	st, err := getState(cs)
	if err != nil {
		return
	}
	pl.forget(pod)
	for _, e := range st.entries {
		if !e.implements(abiv1.Point_POINT_UNRESERVE) {
			continue
		}
		ni, err := pl.boundNode(st, nodeName)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Unreserve: node not found", "policy", e.slot.Args.Name, "node", nodeName)
			continue
		}
		_, acts, err := e.version.NodeCall(ctx, abiv1.Point_POINT_UNRESERVE, st.cycle, ni, pl.waiting())
		if err != nil {
			pl.failed(ctx, e, abiv1.Point_POINT_UNRESERVE, err)
			continue
		}
		pl.apply(ctx, e, acts, false)
	}
}

// Permit allows the pod only if every policy allows it; a Wait from any
// policy parks it for the longest timeout asked. Policies' verdicts on other
// waiting pods are applied only once every policy has answered: rejections
// always, allowances only if no policy rejected this pod (a gang must not
// bind without the member whose Permit failed). A waiting pod is let go
// only when every policy that made it wait has allowed it.
func (pl *Plugin) Permit(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	st, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err), 0
	}
	defer st.cycle.ReleaseSnapshot()
	var (
		wait    time.Duration
		reasons []string
		waitFor []string
		actions []policyActions
		verdict *fwk.Status
	)
	for _, e := range st.entries {
		if !e.implements(abiv1.Point_POINT_PERMIT) {
			continue
		}
		ni, err := pl.nodeInfo(nodeName, pod)
		if err != nil {
			verdict = fwk.AsStatus(err)
			break
		}
		res, err := timed(e, abiv1.Point_POINT_PERMIT, func() (policy.PermitResult, error) {
			return e.version.Permit(ctx, st.cycle, ni, pl.waiting())
		})
		if err == nil {
			err = guestFailure(e, abiv1.Point_POINT_PERMIT, res.Status)
		}
		if err != nil {
			if fs := pl.failed(ctx, e, abiv1.Point_POINT_PERMIT, err); fs != nil {
				verdict = fs
				break
			}
			continue
		}
		actions = append(actions, policyActions{e, res.Actions})
		switch res.Status.Code {
		case abiv1.Code_CODE_SUCCESS:
		case abiv1.Code_CODE_WAIT:
			t := res.Timeout
			if t <= 0 || t > maxPermitWait {
				t = maxPermitWait
			}
			wait = max(wait, t)
			reasons = append(reasons, res.Status.Reasons...)
			waitFor = append(waitFor, e.slot.Args.Name)
		default:
			verdict = toStatus(res.Status)
		}
		if verdict != nil {
			break
		}
	}
	for _, a := range actions {
		pl.apply(ctx, a.entry, a.actions, verdict == nil)
	}
	if verdict != nil {
		return verdict, 0
	}
	if wait > 0 {
		pl.waits.Store(pod.UID, newWaitSet(waitFor))
		return fwk.NewStatus(fwk.Wait, reasons...), wait
	}
	return nil, 0
}

type policyActions struct {
	entry   *entry
	actions []*abiv1.WaitingPodAction
}

// waitSet is the policies a waiting pod still waits for.
type waitSet struct {
	mu      sync.Mutex
	pending map[string]bool
}

func newWaitSet(names []string) *waitSet {
	w := &waitSet{pending: map[string]bool{}}
	for _, n := range names {
		w.pending[n] = true
	}
	return w
}

// allow records that a policy allowed the pod and reports whether none is
// left waiting.
func (w *waitSet) allow(policyName string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pending, policyName)
	return len(w.pending) == 0
}

// forget drops the wait bookkeeping of a pod that left Permit.
func (pl *Plugin) forget(pod *v1.Pod) { pl.waits.Delete(pod.UID) }

// apply carries out a policy's verdicts on waiting pods: rejections always,
// allowances when allowed is true and the pod waits for no other policy.
func (pl *Plugin) apply(ctx context.Context, e *entry, acts []*abiv1.WaitingPodAction, allowed bool) {
	for _, a := range acts {
		uid := typesUID(a.Uid)
		wp := pl.handle.GetWaitingPod(uid)
		if wp == nil {
			continue
		}
		if !a.Allow {
			reason := a.Reason
			if reason == "" {
				reason = e.slot.Args.Name + ": rejected while waiting"
			}
			pl.waits.Delete(uid)
			wp.Reject(Name, reason)
			continue
		}
		if !allowed {
			continue
		}
		if v, ok := pl.waits.Load(uid); ok && !v.(*waitSet).allow(e.slot.Args.Name) {
			continue // another policy still holds it
		}
		pl.waits.Delete(uid)
		wp.Allow(Name)
	}
}

// waiting lists the pods waiting at Permit in this profile.
func (pl *Plugin) waiting() []*abiv1.WaitingPod {
	var out []*abiv1.WaitingPod
	var mu sync.Mutex
	pl.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		p := wp.GetPod()
		mu.Lock()
		out = append(out, convert.WaitingPod(p, p.Spec.NodeName))
		mu.Unlock()
	})
	return out
}

// PreBindPreFlight skips PreBind when no policy exports it.
func (pl *Plugin) PreBindPreFlight(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	st, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	for _, e := range st.entries {
		if e.implements(abiv1.Point_POINT_PRE_BIND) {
			return nil
		}
	}
	return fwk.NewStatus(fwk.Skip)
}

// PreBind runs policies' PreBind; a rejection aborts the binding.
func (pl *Plugin) PreBind(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	return pl.nodeCall(ctx, cs, abiv1.Point_POINT_PRE_BIND, nodeName)
}

// PostBind informs policies of a binding.
func (pl *Plugin) PostBind(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) {
	pl.forget(pod)
	_ = pl.nodeCall(ctx, cs, abiv1.Point_POINT_POST_BIND, nodeName)
}

func (pl *Plugin) nodeCall(ctx context.Context, cs fwk.CycleState, pt abiv1.Point, nodeName string) *fwk.Status {
	st, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	for _, e := range st.entries {
		if !e.implements(pt) {
			continue
		}
		ni, err := pl.boundNode(st, nodeName)
		if err != nil {
			return fwk.AsStatus(err)
		}
		s, err := timed(e, pt, func() (policy.Status, error) {
			s, _, err := e.version.NodeCall(ctx, pt, st.cycle, ni, nil)
			return s, err
		})
		if err == nil {
			err = guestFailure(e, pt, s)
		}
		if err != nil {
			if fs := pl.failed(ctx, e, pt, err); fs != nil {
				return fs
			}
			continue
		}
		if !s.IsSuccess() {
			return toStatus(s)
		}
	}
	return nil
}

// boundNode is the node for Reserve and the binding phase: the copy taken
// at Reserve when there is one.
func (pl *Plugin) boundNode(st *cycleState, name string) (fwk.NodeInfo, error) {
	if st.reserved != nil && st.reserved.Node() != nil && st.reserved.Node().Name == name {
		return st.reserved, nil
	}
	return pl.nodeInfo(name, st.cycle.Pod)
}

// nodeInfo finds a node in the current snapshot.
func (pl *Plugin) nodeInfo(name string, pod *v1.Pod) (fwk.NodeInfo, error) {
	ni, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(name)
	if err != nil {
		return nil, fmt.Errorf("%s: node %s for pod %s/%s: %w", Name, name, pod.Namespace, pod.Name, err)
	}
	return ni, nil
}

// EventsToRegister requeues pods rejected by a policy when something that
// can change a policy's verdict happens: a node appears or changes, a pod
// is deleted (freeing resources) or added (a gang member arrives).
func (pl *Plugin) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.Update}},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add | fwk.Delete | fwk.Update}},
	}, nil
}
