package plugin

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/policy"
)

// PreFilter pins the policy versions for the cycle, starts the cycle in
// each policy (which runs the guests' PreFilter) and merges their node
// subsets.
func (pl *Plugin) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	st := pl.newCycle(pod, nodes)
	groupRejected, by := pl.withGroup(cs, pod, st.c.Policy)
	st.rejected = pl.rejected.start(pod)
	cs.Write(stateKey, st)
	if groupRejected != nil {
		pl.rejected.add(st.rejected, by)
		return nil, groupRejected
	}
	if len(st.blocked) > 0 {
		for _, b := range st.blocked {
			pl.rejected.add(st.rejected, b.Name)
		}
		b := st.blocked[0]
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("policy %s cannot serve: %s", b.Name, b.Reason)).WithPlugin(Name)
	}
	res := st.c.PreFilter(ctx)
	switch {
	case res.Status != nil:
		pl.noteRejection(st, res.Status)
		return nil, toStatus(res.Status).WithPlugin(Name)
	case res.Skip:
		return nil, fwk.NewStatus(fwk.Skip)
	case res.NodeNames != nil:
		return &fwk.PreFilterResult{NodeNames: res.NodeNames}, nil
	}
	return nil, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin: the plugin follows
// the pods the scheduler's simulations (preemption, nominated pods) add and
// remove when a current policy implements POINT_POD_CHANGES, and has no
// extensions otherwise, which spares every simulation the calls. The
// framework asks at each simulation step, so a reload that brings or drops
// such a policy takes effect at the next one; a cycle pinned to a version
// that follows pod changes while the current one does not gets plain Filter
// on the modified nodes, as before.
func (pl *Plugin) PreFilterExtensions() fwk.PreFilterExtensions {
	for _, s := range pl.lcRoster().Slots {
		if v := s.Current(); v != nil && v.Implements(abiv1.Point_POINT_POD_CHANGES) {
			return pl
		}
	}
	return nil
}

// AddPod implements fwk.PreFilterExtensions: it records, in the
// simulation's clone of the cycle state, a pod added to its node.
func (pl *Plugin) AddPod(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, pi fwk.PodInfo, ni fwk.NodeInfo) *fwk.Status {
	st, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	st.withChange(false, pi)
	return nil
}

// RemovePod implements fwk.PreFilterExtensions: it records, in the
// simulation's clone of the cycle state, a pod removed from its node.
func (pl *Plugin) RemovePod(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, pi fwk.PodInfo, ni fwk.NodeInfo) *fwk.Status {
	st, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	st.withChange(true, pi)
	return nil
}

// Filter passes a node only if every policy passes it, in order. The
// reasons it returns for a pod's nodes are bounded by the cycle's budget.
func (pl *Plugin) Filter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	st, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	s, e := st.c.FilterChanged(ctx, ni, st.changes)
	if s == nil {
		return nil
	}
	pl.noteRejection(st, s)
	return st.reasons.limit(ctx, pod, e.Name, toStatus(s))
}

// PostFilter runs when no node fits. When a policy chooses preemption
// victims, the upstream preemption evaluator runs with them (preempt.go);
// then, if that nominated nothing, the policies that export PostFilter have
// their say: the first nomination wins.
func (pl *Plugin) PostFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	st, err := getState(cs)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if choosesVictims(st) {
		res, s := pl.preempt(ctx, cs, pod, m)
		if s.IsSuccess() || !st.c.Implements(abiv1.Point_POINT_POST_FILTER) {
			return res, s
		}
	}
	if !st.c.Implements(abiv1.Point_POINT_POST_FILTER) {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	all, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	statuses := make([]policy.NodeStatus, 0, len(all))
	for _, ni := range all {
		s := m.Get(ni.Node().Name)
		ps := policy.Status{Code: abiv1.Code_CODE_UNSCHEDULABLE, Reasons: s.Reasons()}
		if s.Code() == fwk.UnschedulableAndUnresolvable {
			ps.Code = abiv1.Code_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE
		}
		statuses = append(statuses, policy.NodeStatus{Node: ni, Status: ps})
	}
	nominated, s := st.c.PostFilter(ctx, statuses)
	if nominated != "" {
		return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatedNodeName: nominated, NominatingMode: fwk.ModeOverride}}, nil
	}
	return nil, toStatus(s)
}
