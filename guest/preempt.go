package guest

import abiv1 "github.com/wasmsched/wasmsched/abi/v1"

// filterChanged handles wasmsched_call(POINT_FILTER) with a FilterRequest:
// Filter on a node the scheduler modified (preemption's simulation,
// nominated pods). The changes apply to a fresh copy of the cycle: PreFilter
// runs again on it (its verdict is not used, the cycle already passed it) so
// that State is as PreFilter leaves it for the unmodified snapshot, then
// AddPod or RemovePod for each change in order, then Filter. The cycle
// itself, State included, is left as it was, so later calls of the cycle
// (plain Filter, Score) see PreFilter's State, not this simulation's.
//
// A non-success from AddPod or RemovePod is the verdict; Filter is not run.
//
// The host syncs the modified node before this call, so the re-run
// PreFilter already sees it modified: a PreFilter that sums over the
// resident nodes (WantsAllNodes with WantsPods) counts the simulation's
// changes on that node once more than the snapshot holds. State built from
// the pod, settings, context objects or tenant usage is exact.
func (in *instance) filterChanged(n uint32) uint32 {
	var m abiv1.FilterRequest
	if err := in.decode(n, &m); err != nil {
		return in.fail(Error, "decode FilterRequest: "+err.Error())
	}
	node := in.node(uint32(m.NodeHandle))
	if node == nil {
		return in.unknownNode(uint32(m.NodeHandle))
	}
	p := in.policy
	c := in.simulation()
	if p.PreFilter != nil {
		_ = p.PreFilter(c)
	}
	for i, ch := range m.Changes {
		if ch.GetPod() == nil {
			return in.fail(Error, "FilterRequest change "+itoa(int64(i))+" without a pod")
		}
		hook := p.AddPod
		if ch.Removed {
			hook = p.RemovePod
		}
		if hook == nil {
			continue
		}
		if s := hook(c, ch.Pod, node); s.Code != Success || len(s.Reasons) > 0 {
			return in.status(s)
		}
	}
	if p.Filter == nil {
		return in.status(OK())
	}
	return in.status(p.Filter(c, node))
}

// simulation returns a copy of the cycle for a simulated Filter: the same
// pod and nodes, no State and no node restriction, so that running
// PreFilter on it changes nothing the cycle's other calls read.
func (in *instance) simulation() *Cycle {
	c := *in.cycle
	c.State = nil
	c.restricted, c.restrict = false, nil
	return &c
}

// selectVictims handles wasmsched_call(POINT_SELECT_VICTIMS) with a
// VictimsRequest: the policy names the pods to evict from a node, the most
// expendable first. The host validates the answer (the pod must fit without
// them) and puts back whatever it can.
func (in *instance) selectVictims(n uint32) uint32 {
	var m abiv1.VictimsRequest
	if err := in.decode(n, &m); err != nil {
		return in.fail(Error, "decode VictimsRequest: "+err.Error())
	}
	node := in.node(uint32(m.NodeHandle))
	if node == nil {
		return in.unknownNode(uint32(m.NodeHandle))
	}
	if in.policy.SelectVictims == nil {
		return in.status(Status{Code: Unschedulable, Reasons: []string{"policy does not select victims"}})
	}
	victims, s := in.policy.SelectVictims(in.cycle, node, m.Pods)
	in.setResult(s)
	if s.Code == Success {
		in.result.Victims = victims
	}
	return uint32(s.Code)
}
