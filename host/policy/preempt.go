package policy

import (
	"context"

	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/convert"
	"github.com/wasmsched/wasmsched/host/engine"
)

// PodChange is a pod the scheduler added to (a nominated pod, a victim put
// back) or removed from (a preemption victim) the node of a simulated
// Filter, through the PreFilter extensions AddPod and RemovePod.
type PodChange struct {
	Removed bool
	Pod     fwk.PodInfo
}

// FilterChanged runs the guest's Filter on a node the scheduler modified
// for a simulation, with the changes that made it so, in order: the guest
// replays them on a fresh PreFilter state (POINT_POD_CHANGES). Only for
// guests that implement POINT_POD_CHANGES; others get Filter. The node is
// synced as Filter syncs it (the NodeInfo given, changes included, is the
// truth for the call); neither the batch verdicts nor the cache of the last
// rejection's reasons apply: both belong to the unmodified snapshot.
func (p *Policy) FilterChanged(ctx context.Context, c *Cycle, ni fwk.NodeInfo, changes []PodChange) (Status, error) {
	var s Status
	err := p.with(ctx, "filter", func(m *member) error {
		h, err := p.ready(m, c, ni)
		if err != nil {
			return err
		}
		req := &abiv1.FilterRequest{NodeHandle: h, Changes: make([]*abiv1.PodChange, 0, len(changes))}
		for _, ch := range changes {
			if pod := convert.PodSummary(ch.Pod); pod != nil {
				req.Changes = append(req.Changes, &abiv1.PodChange{Removed: ch.Removed, Pod: pod})
			}
		}
		code, err := m.in.Call(abiv1.Point_POINT_FILTER, engine.Marshal(req))
		if err != nil {
			return err
		}
		s, err = p.status(m, "filter", code)
		return err
	})
	return s, err
}

// SelectVictims asks the guest which pods to evict from ni so that the
// cycle's pod fits there (POINT_SELECT_VICTIMS): on Success the UIDs of
// the victims, the most expendable first (none: nothing to evict here);
// a rejection says evicting cannot help on this node. The guest is sent
// the node's pods, whatever the policy's wants_pods, and the caller checks
// the answer: UIDs need not name pods on the node.
func (p *Policy) SelectVictims(ctx context.Context, c *Cycle, ni fwk.NodeInfo) ([]string, Status, error) {
	var (
		victims []string
		s       Status
	)
	const call = "select_victims"
	err := p.with(ctx, call, func(m *member) error {
		h, err := p.ready(m, c, ni)
		if err != nil {
			return err
		}
		req := &abiv1.VictimsRequest{NodeHandle: h, Pods: convert.PodSummaries(ni.GetPods())}
		code, err := m.in.Call(abiv1.Point_POINT_SELECT_VICTIMS, engine.Marshal(req))
		if err != nil {
			return err
		}
		r, err := m.in.Result(call)
		if err != nil {
			return err
		}
		s = Status{Code: code, Reasons: r.GetReasons()}
		if code == abiv1.Code_CODE_SUCCESS {
			victims = r.GetVictims()
		}
		return nil
	})
	return victims, s, err
}
