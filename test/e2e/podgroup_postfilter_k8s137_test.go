//go:build !k8s1.35 && !k8s1.36

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// TestSmokePodGroupPostFilter (Kubernetes 1.37, gates on): rack r1 has
// room for a gang of 4 by GPUs, but one of its two nodes is tainted, so the
// scheduler places only 2 members there and the gang fits no placement.
// The topology policy's PodGroupPostFilter says why: its reason is in the
// PodGroup's PodGroupInitiallyScheduled condition, and no member is bound.
// Then a policy whose PodGroupPostFilter traps fails the group's cycle: the
// condition says SchedulerError with the trap, and still nothing is bound;
// and one that answers Success with nominations has the members nominated.
// DefaultPreemption's group preemption is disabled at podGroupPostFilter:
// it runs before WasmPolicy and, finding no victims, answers
// UnschedulableAndUnresolvable, which ends the point (upstream 1.37.2).
func TestSmokePodGroupPostFilter(t *testing.T) {
	c := startGroupCluster(t, true)
	topology := policy{Name: "topology", Package: "examples/topology", Settings: `{"topologyKey": "example.com/gpu-domain"}`}
	noGroupPreemption := func(cfg map[string]any) {
		plugins := cfg["profiles"].([]any)[0].(map[string]any)["plugins"].(map[string]any)
		plugins["multiPoint"].(map[string]any)["disabled"] = []any{map[string]any{"name": "TopologyPlacementGenerator"}}
		plugins["podGroupPostFilter"] = map[string]any{"disabled": []any{map[string]any{"name": "DefaultPreemption"}}}
	}
	restartScheduler(t, c, []policy{topology}, noGroupPreemption)
	c.gpuNode("r1-a", "r1")
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("32"), v1.ResourceMemory: resource.MustParse("64Gi"),
		v1.ResourcePods: resource.MustParse("110"), gpu: resource.MustParse("8")}
	tainted := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "r1-b", Labels: map[string]string{"example.com/rack": "r1"}},
		Spec:   v1.NodeSpec{Taints: []v1.Taint{{Key: "example.com/maintenance", Effect: v1.TaintEffectNoSchedule}}},
		Status: v1.NodeStatus{Allocatable: alloc, Capacity: alloc}}
	if _, err := c.client.CoreV1().Nodes().Create(context.Background(), tainted, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := c.gang("train", 4, 4, "4")
	want := "policy topology: topology: gang default/train fit in none of the 1 example.com/rack domains with room for 4 pods × 4 nvidia.com/gpu (r1): members were turned away on their nodes"
	c.waitGroupCondition("train", "Unschedulable", want)
	// The two members that fit r1-a carry the group's status; the others
	// their own reasons.
	fitted := 0
	for _, p := range pods {
		msg := c.waitUnschedulable(p, 2*time.Minute)
		if strings.Contains(msg, want) {
			fitted++
		}
		t.Logf("%s: %s", p, msg)
	}
	if fitted != 2 {
		t.Errorf("%d members carry the policy's reason, want the 2 that fit r1-a", fitted)
	}

	// Named apart from the other tests' groupprobe, whose call counts
	// (process-wide metrics) they check.
	restartScheduler(t, c, []policy{topology, {Name: "trapper", Package: "test/guests/groupprobe", Settings: `{"postFilter": "panic"}`}}, noGroupPreemption)
	c.waitGroupCondition("train", "SchedulerError", "pod_group_post_filter: wasm error: unreachable: panic: groupprobe: panic in PodGroupPostFilter")
	for _, p := range pods {
		c.stayUnbound(p, 0)
	}

	// A PodGroupPostFilter answering Success with nominations: the
	// scheduler sets every member's nominated node (groupprobe nominates
	// them all to the first node of the snapshot) and tries the group again.
	restartScheduler(t, c, []policy{topology, {Name: "nominator", Package: "test/guests/groupprobe", Settings: `{"postFilter": "nominate"}`}}, noGroupPreemption)
	nominated := map[string]string{}
	err := testwasm.Poll(t, 100*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, error) {
		for _, name := range pods {
			p, err := c.client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			nominated[name] = p.Status.NominatedNodeName
		}
		for _, n := range nominated {
			if n == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("members' nominated nodes %v: %v", nominated, err)
	}
	for name, n := range nominated {
		if n != nominated[pods[0]] || (n != "r1-a" && n != "r1-b") {
			t.Errorf("pod %s nominated to %q, want every member on the same node of r1 (%v)", name, n, nominated)
		}
	}
	for _, p := range pods {
		c.stayUnbound(p, 0)
	}
}

// waitGroupCondition waits until the PodGroup's PodGroupInitiallyScheduled
// condition is False for reason with a message containing want.
func (c *cluster) waitGroupCondition(name, reason, want string) {
	c.t.Helper()
	var got string
	err := testwasm.Poll(c.t, 100*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, error) {
		pg, err := c.client.SchedulingV1beta1().PodGroups("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cd := range pg.Status.Conditions {
			if cd.Type == "PodGroupInitiallyScheduled" && cd.Status == metav1.ConditionFalse {
				got = cd.Reason + ": " + cd.Message
				return cd.Reason == reason && strings.Contains(cd.Message, want), nil
			}
		}
		return false, nil
	})
	if err != nil {
		c.t.Fatalf("PodGroup %s: condition %q, want %s with %q: %v", name, got, reason, want, err)
	}
}
