package plugin

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// victimSelection drives the upstream preemption evaluator for the policies
// that choose victims (POINT_SELECT_VICTIMS), as scheduler-plugins'
// CapacityScheduling does for its quotas: the evaluator finds candidate
// nodes, picks the best one, evicts and nominates; the policies decide,
// node by node, whom to evict (preemptor.SelectVictimsOnNode). It is built
// on first use, since it needs the framework handle's informers.
type victimSelection struct {
	once sync.Once
	ev   *preemption.Evaluator
	err  error
}

// evaluator returns the plugin's preemption evaluator, building it once.
func (pl *Plugin) evaluator(ctx context.Context) (*preemption.Evaluator, error) {
	vs := &pl.victims
	vs.once.Do(func() {
		if pl.handle == nil || pl.handle.SharedInformerFactory() == nil {
			vs.err = fmt.Errorf("%s: preemption needs the scheduler's framework handle", Name)
			return
		}
		fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
		// Victims are evicted within PostFilter: asynchronous preemption
		// keeps the preemptor out of the queue meanwhile through the
		// evaluator's PreEnqueue, which this plugin does not run.
		fts.EnableAsyncPreemption = false
		// DefaultPreemption's rules for what is not about victims: which
		// pods may preempt, how many candidate nodes to try, how to rank
		// them. Its arguments are the scheduler's defaults.
		dp, err := defaultpreemption.New(ctx, &config.DefaultPreemptionArgs{MinCandidateNodesPercentage: 10, MinCandidateNodesAbsolute: 100}, pl.handle, fts)
		if err != nil {
			vs.err = fmt.Errorf("%s: preemption: %w", Name, err)
			return
		}
		vs.ev = newEvaluator(pl.handle, &preemptor{pl: pl, dp: dp}, fts)
	})
	return vs.ev, vs.err
}

// preemptor is the plugin's preemption.Interface: victims come from the
// policies, the rest from DefaultPreemption.
type preemptor struct {
	pl *Plugin
	dp *defaultpreemption.DefaultPreemption
}

func (p *preemptor) GetOffsetAndNumCandidates(nodes int32) (int32, int32) {
	return p.dp.GetOffsetAndNumCandidates(nodes)
}

func (p *preemptor) CandidatesToVictimsMap(candidates []preemption.Candidate) map[string]*extenderv1.Victims {
	return p.dp.CandidatesToVictimsMap(candidates)
}

func (p *preemptor) PodEligibleToPreemptOthers(ctx context.Context, pod *v1.Pod, nominatedNodeStatus *fwk.Status) (bool, string) {
	return p.dp.PodEligibleToPreemptOthers(ctx, pod, nominatedNodeStatus)
}

func (p *preemptor) OrderedScoreFuncs(ctx context.Context, nodesToVictims map[string]*extenderv1.Victims) []func(node string) int64 {
	return p.dp.OrderedScoreFuncs(ctx, nodesToVictims)
}

// selectVictims is SelectVictimsOnNode for every minor. The evaluator gives
// it copies of the cycle state and of the node, which it modifies. The
// policies name the victims (compose.SelectVictims); with them removed
// from the node (and RemovePod run for each, so that every plugin's state
// follows) the pod must pass every Filter plugin, nominated pods included,
// or the node is no candidate. Then each victim, from the end of the list
// (the least expendable first), is put back (AddPod) and stays if the pod
// still fits. The victims returned are in the policies' order.
//
// PDB violations are counted as upstream counts them: a victim violates
// when a PodDisruptionBudget selecting it has no disruption left, counting
// the victims before it.
func (p *preemptor) selectVictims(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo, pdbs []*policyv1.PodDisruptionBudget) ([]*v1.Pod, int, *fwk.Status) {
	st, err := getState(cs)
	if err != nil {
		return nil, 0, fwk.AsStatus(err)
	}
	uids, s := st.c.SelectVictims(ctx, ni)
	if s != nil {
		return nil, 0, toStatus(s).WithPlugin(Name)
	}
	if len(uids) == 0 {
		return nil, 0, fwk.NewStatus(fwk.Unschedulable, "no policy chose victims on this node").WithPlugin(Name)
	}
	onNode := make(map[types.UID]fwk.PodInfo, len(ni.GetPods()))
	for _, pi := range ni.GetPods() {
		onNode[pi.GetPod().UID] = pi
	}
	victims := make([]fwk.PodInfo, 0, len(uids))
	for _, uid := range uids {
		pi, ok := onNode[types.UID(uid)]
		if !ok {
			return nil, 0, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("a policy chose pod %s as a victim, which is not on node %s", uid, ni.Node().Name)).WithPlugin(Name)
		}
		victims = append(victims, pi)
	}

	logger := klog.FromContext(ctx)
	h := p.pl.handle
	remove := func(pi fwk.PodInfo) *fwk.Status {
		if err := ni.RemovePod(logger, pi.GetPod()); err != nil {
			return fwk.AsStatus(err)
		}
		return h.RunPreFilterExtensionRemovePod(ctx, cs, pod, pi, ni)
	}
	for _, pi := range victims {
		if s := remove(pi); !s.IsSuccess() {
			return nil, 0, s
		}
	}
	if s := h.RunFilterPluginsWithNominatedPods(ctx, cs, pod, ni); !s.IsSuccess() {
		return nil, 0, s
	}
	evicted := make([]bool, len(victims))
	for i := len(victims) - 1; i >= 0; i-- {
		pi := victims[i]
		ni.AddPodInfo(pi)
		if s := h.RunPreFilterExtensionAddPod(ctx, cs, pod, pi, ni); !s.IsSuccess() {
			return nil, 0, s
		}
		if h.RunFilterPluginsWithNominatedPods(ctx, cs, pod, ni).IsSuccess() {
			continue // reprieved
		}
		if s := remove(pi); !s.IsSuccess() {
			return nil, 0, s
		}
		evicted[i] = true
	}
	var out []*v1.Pod
	for i, pi := range victims {
		if evicted[i] {
			out = append(out, pi.GetPod())
		}
	}
	if len(out) == 0 {
		return nil, 0, fwk.NewStatus(fwk.Unschedulable, "the pod fits without the victims the policies chose").WithPlugin(Name)
	}
	return out, pdbViolations(out, pdbs), nil
}

// pdbViolations counts the victims whose eviction a PodDisruptionBudget
// does not allow: one selecting the victim, in its namespace, with no
// disruption left once the victims before it are counted. Pods the budget
// already counts as disrupted do not use it up again.
func pdbViolations(victims []*v1.Pod, pdbs []*policyv1.PodDisruptionBudget) int {
	left := make([]int32, len(pdbs))
	for i, pdb := range pdbs {
		left[i] = pdb.Status.DisruptionsAllowed
	}
	n := 0
	for _, pod := range victims {
		violates := false
		for i, pdb := range pdbs {
			if pdb.Namespace != pod.Namespace || pdb.Spec.Selector == nil {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
				continue
			}
			if _, counted := pdb.Status.DisruptedPods[pod.Name]; counted {
				continue
			}
			left[i]--
			if left[i] < 0 {
				violates = true
			}
		}
		if violates {
			n++
		}
	}
	return n
}

// preempt runs the evaluator for the pod when a policy of its cycle chooses
// victims.
func (pl *Plugin) preempt(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	ev, err := pl.evaluator(ctx)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	return ev.Preempt(ctx, cs, pod, m)
}

// choosesVictims reports whether a policy of the cycle chooses victims.
func choosesVictims(st *cycleState) bool {
	return st.c.Implements(abiv1.Point_POINT_SELECT_VICTIMS)
}
