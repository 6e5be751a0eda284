//go:build !k8s1.35

package plugin

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// A PodGroup created or changed requeues its own pending members only.
func TestHintGroupChanged(t *testing.T) {
	name := "train"
	member := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w0", Namespace: "ml"},
		Spec: v1.PodSpec{SchedulingGroup: &v1.PodSchedulingGroup{PodGroupName: &name}}}
	for _, c := range []struct {
		pod      *v1.Pod
		ns, name string
		want     fwk.QueueingHint
	}{
		{member, "ml", "train", fwk.Queue},
		{member, "ml", "other", fwk.QueueSkip},
		{member, "research", "train", fwk.QueueSkip},
		{&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "solo", Namespace: "ml"}}, "ml", "train", fwk.QueueSkip},
	} {
		obj := &metav1.ObjectMeta{Name: c.name, Namespace: c.ns}
		if got, err := hintGroupChanged(klog.Background(), c.pod, nil, obj); err != nil || got != c.want {
			t.Errorf("pod %s, PodGroup %s/%s: %v %v, want %v", c.pod.Name, c.ns, c.name, got, err, c.want)
		}
	}
	pl := &Plugin{}
	evs, _ := pl.EventsToRegister(context.Background())
	found := false
	for _, e := range evs {
		found = found || e.Event.Resource == fwk.PodGroup
	}
	if !found {
		t.Error("EventsToRegister has no PodGroup event")
	}
}

// Without policies exporting PlacementGenerate the group is tried on the
// whole parent placement; without scorers every placement scores 0.
func TestPlacementWithoutPolicies(t *testing.T) {
	pl := &Plugin{}
	parent := &fwk.Placement{Name: "all"}
	res, st := pl.GeneratePlacements(context.Background(), nil, nil, parent)
	if !st.IsSuccess() || len(res.Placements) != 1 || res.Placements[0] != parent {
		t.Errorf("GeneratePlacements: %v %v", res, st)
	}
	if v, st := pl.scorePlacement(context.Background(), nil, &fwk.PodGroupAssignments{Placement: parent}); v != 0 || !st.IsSuccess() {
		t.Errorf("scorePlacement: %d %v", v, st)
	}
}

// The members' nodes are sorted, each once; unplaced members have none.
func TestMemberNodes(t *testing.T) {
	on := func(node string) *v1.Pod { return &v1.Pod{Spec: v1.PodSpec{NodeName: node}} }
	got := memberNodes([]*v1.Pod{on("n2"), on("n1"), on(""), nil, on("n2")})
	if len(got) != 2 || got[0] != "n1" || got[1] != "n2" {
		t.Errorf("memberNodes %v, want [n1 n2]", got)
	}
}

// The pods of a pod-group cycle are converted once for all its placement
// calls, and again when the group's pods are other objects.
func TestGroupPodsConvertedOnce(t *testing.T) {
	a := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w0", Namespace: "ml", UID: "u0"}}
	b := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: "ml", UID: "u1"}}
	var c groupPods
	first := c.get([]*v1.Pod{a, b})
	if len(first) != 2 || first[0].GetName() != "w0" || first[1].GetUid() != "u1" {
		t.Fatalf("converted %v, want w0 and w1", first)
	}
	if again := c.get([]*v1.Pod{a, b}); &again[0] != &first[0] {
		t.Error("the same pods were converted again")
	}
	changed := a.DeepCopy()
	changed.Name = "w0-new"
	if got := c.get([]*v1.Pod{changed, b}); got[0].GetName() != "w0-new" {
		t.Errorf("a changed pod object kept its old conversion %q", got[0].GetName())
	}
	if got := c.get([]*v1.Pod{b}); len(got) != 1 || got[0].GetName() != "w1" {
		t.Errorf("fewer pods: %v, want w1 alone", got)
	}
}
