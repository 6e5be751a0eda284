//go:build k8s1.35 || k8s1.36

package plugin

import fwk "k8s.io/kube-scheduler/framework"

// podEvents are the pod events for s. Before 1.37 the framework does not
// tell pods on nodes from pending ones in the events it registers: a
// policy that waits for pods to leave nodes is asked about pending pods
// deleted too, and every pod update is registered for the rejected pod's
// own.
func (pl *Plugin) podEvents(s eventSet) []fwk.ClusterEventWithHint {
	ev := func(a fwk.ActionType, h fwk.QueueingHintFn) fwk.ClusterEventWithHint {
		return fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: a}, QueueingHintFn: h}
	}
	out := []fwk.ClusterEventWithHint{ev(fwk.Update, pl.hintPodUpdated)}
	if s&(evPodArrival|evPodOther) != 0 {
		out = append(out, ev(fwk.Add, pl.hintPodAdded))
	}
	if s&evPodAny != 0 {
		out = append(out, ev(fwk.Delete, pl.hintPodDeleted))
	}
	return out
}
