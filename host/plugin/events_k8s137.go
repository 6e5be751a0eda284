//go:build !k8s1.35 && !k8s1.36

package plugin

import fwk "k8s.io/kube-scheduler/framework"

// podEvents are the pod events for s. Since 1.37 the framework tells pods
// on nodes (AssignedPod), pending pods (UnscheduledPod) and the rejected
// pod itself (TargetPod) apart, so a policy that waits for pods to leave
// nodes is not asked about every pod bound.
func (pl *Plugin) podEvents(s eventSet) []fwk.ClusterEventWithHint {
	ev := func(r fwk.EventResource, a fwk.ActionType, h fwk.QueueingHintFn) fwk.ClusterEventWithHint {
		return fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: r, ActionType: a}, QueueingHintFn: h}
	}
	if s&evPodOther != 0 {
		return []fwk.ClusterEventWithHint{
			ev(fwk.Pod, fwk.Add, pl.hintPodAdded),
			ev(fwk.Pod, fwk.Delete, pl.hintPodDeleted),
			ev(fwk.Pod, fwk.Update, pl.hintPodUpdated),
		}
	}
	out := []fwk.ClusterEventWithHint{ev(fwk.TargetPod, fwk.Update, pl.hintPodUpdated)}
	if s&evPodArrival != 0 {
		out = append(out,
			ev(fwk.AssignedPod, fwk.Add, pl.hintPodAdded),
			ev(fwk.UnscheduledPod, fwk.Add, pl.hintPodAdded),
			ev(fwk.UnscheduledPod, fwk.Delete, pl.hintPodDeleted),
			ev(fwk.AssignedPod, fwk.UpdatePodLabel, pl.hintPodUpdated),
			ev(fwk.UnscheduledPod, fwk.UpdatePodLabel, pl.hintPodUpdated),
		)
	}
	if s&evPodDeparture != 0 {
		out = append(out,
			ev(fwk.AssignedPod, fwk.Delete, pl.hintPodDeleted),
			ev(fwk.AssignedPod, fwk.UpdatePodScaleDown, pl.hintPodUpdated),
		)
	}
	return out
}
