package plugin

import (
	"context"
	"slices"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

func TestNeeds(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  *abiv1.Requeue
		want eventSet
	}{
		{"nothing declared", nil, evAll},
		{"gpu", &abiv1.Requeue{NodeLabelKeys: []string{"gpu"}, NodeAllocatable: true, PodDeleted: &abiv1.PodMatch{Resources: []string{"nvidia.com/gpu"}}},
			evNodeAdd | evNodeLabel | evNodeAllocatable | evPodDeparture},
		{"gang", &abiv1.Requeue{PodAdded: &abiv1.PodMatch{SameLabelKeys: []string{"gang"}}}, evPodArrival},
		{"nodepin", &abiv1.Requeue{NodeAdded: true}, evNodeAdd},
		{"taints", &abiv1.Requeue{NodeTaints: true}, evNodeAdd | evNodeTaint},
		{"any node change", &abiv1.Requeue{NodeUpdated: true}, evNodeAdd | evNodeOther},
		{"objects only", &abiv1.Requeue{Objects: true}, 0},
	} {
		if got := needs(&abiv1.PolicyInfo{Requeue: tc.req}); got != tc.want {
			t.Errorf("%s: needs %b, want %b", tc.name, got, tc.want)
		}
	}
	if got := nodeUpdateActions(evNodeLabel | evNodeAllocatable); got != fwk.UpdateNodeLabel|fwk.UpdateNodeAllocatable {
		t.Errorf("node update actions for labels and allocatable: %v", got)
	}
	if got := nodeUpdateActions(evNodeOther | evNodeLabel); got != fwk.Update {
		t.Errorf("node update actions for any change: %v", got)
	}
}

// A profile without policies registers only a change of the pod itself;
// the registration is recorded, and nothing is left to cover.
func TestEventsToRegisterFollowsRoster(t *testing.T) {
	pl := fixedPlugin()
	if pl.uncovered() != 0 {
		t.Fatal("events uncovered before the framework asked")
	}
	events, err := pl.EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var resources []fwk.EventResource
	for _, e := range events {
		resources = append(resources, e.Event.Resource)
		if e.Event.Resource == fwk.Node {
			t.Errorf("node event %v registered for a profile without policies", e.Event)
		}
	}
	if len(events) == 0 || !slices.ContainsFunc(events, func(e fwk.ClusterEventWithHint) bool { return e.Event.ActionType&fwk.Update != 0 }) {
		t.Errorf("registered %v: want the pod's own update", resources)
	}
	if got := pl.registeredEvents(); got != 0 {
		t.Errorf("registered set %b, want empty", got)
	}
	if pl.uncovered() != 0 {
		t.Error("a profile without policies has events to cover")
	}
}
