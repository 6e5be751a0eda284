package compose

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/wasmsched/wasmsched/host/policy"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// TestPodChanges composes test/guests/preempt (which follows pod changes
// and chooses victims) with the probe (which does neither): Filter under
// changes reaches the first as FilterRequest, replayed in order, and the
// probe as plain Filter; simulations leave the cycle's own Filter verdict
// as it was; the victims of two members choosing the same pod are united.
func TestPodChanges(t *testing.T) {
	ctx := context.Background()
	load := func(name, pkg, settings string) Member {
		p, err := policy.Load(ctx, policy.Options{Name: name, Wasm: testwasm.Bytes(t, pkg), Settings: []byte(settings), MaxInstances: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close(context.Background()) })
		return Member{Name: name, Version: p}
	}
	placed := func(name string, labels map[string]string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Labels: labels}}
	}
	ni := framework.NewNodeInfo(placed("v", map[string]string{"expendable": "true"}), placed("w", nil))
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"reject": "no"}}})
	var v fwk.PodInfo
	for _, pi := range ni.GetPods() {
		if pi.GetPod().Name == "v" {
			v = pi
		}
	}
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p", Labels: map[string]string{"needs-gone": "v"}}}
	members := []Member{load("preempt", "test/guests/preempt", ""), load("probe", "test/guests/probe", `{"rejectLabel": "other"}`), load("again", "test/guests/preempt", "")}
	c := NewCycle(p, []fwk.NodeInfo{ni}, members)
	if res := c.PreFilter(ctx); res.Status != nil || res.Skip {
		t.Fatalf("PreFilter: %+v", res)
	}
	show := func(s *Status, e *Entry) string {
		if s == nil {
			return "pass"
		}
		return fmt.Sprintf("%s %s %q", e.Name, policy.CodeName(s.Code), s.Reasons)
	}
	rejected := `preempt Unschedulable ["preempt: pod v is still on a"]`
	for _, tc := range []struct {
		name    string
		changes []policy.PodChange
		want    string
	}{
		{"no changes", nil, rejected},
		{"v removed", []policy.PodChange{{Removed: true, Pod: v}}, "pass"},
		{"v removed and put back", []policy.PodChange{{Removed: true, Pod: v}, {Pod: v}}, rejected},
	} {
		if got := show(c.FilterChanged(ctx, ni, tc.changes)); got != tc.want {
			t.Errorf("%s: %s; want %s", tc.name, got, tc.want)
		}
	}
	if got := show(c.Filter(ctx, ni)); got != rejected {
		t.Errorf("Filter after the simulations: %s; want %s", got, rejected)
	}
	victims, s := c.SelectVictims(ctx, ni)
	if s != nil || fmt.Sprint(victims) != "[uid-v]" {
		t.Errorf("SelectVictims: %v, %+v; want [uid-v]", victims, s)
	}
}
