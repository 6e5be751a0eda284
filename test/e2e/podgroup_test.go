//go:build !k8s1.35

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

const gpu = v1.ResourceName("nvidia.com/gpu")

// startGroupCluster starts a control plane serving the minor's
// scheduling.k8s.io version of Workload and PodGroup (groupAPI) and a
// scheduler running policies (by default the topology policy and the group
// probe) in place of the built-in placement generator. The gates are the process's
// (the API server and the scheduler run in it), set for this test only.
func startGroupCluster(t *testing.T, gates bool, policies ...policy) *cluster {
	t.Helper()
	testwasm.Claim(t)
	overrides := featuregatetesting.FeatureOverrides{}
	for _, g := range groupGates {
		overrides[g] = gates
	}
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, overrides)
	cp, err := controlplane.Start(context.Background(), controlplane.Options{TB: t,
		ExtraFlags: []string{"--runtime-config=" + groupAPI + "=true"}})
	if err != nil {
		t.Fatalf("control plane: %v", err)
	}
	c := &cluster{t: t, cp: cp, client: cp.Client()}
	c.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(c.kubeconfig); err != nil {
		t.Fatal(err)
	}
	if policies == nil {
		policies = []policy{
			{Name: "topology", Package: "examples/topology", Settings: `{"topologyKey": "example.com/gpu-domain"}`},
			{Name: "groupprobe", Package: "test/guests/groupprobe", Settings: fmt.Sprintf(`{"requirePlacement": %v}`, placementNamed)},
		}
	}
	restartScheduler(t, c, policies,
		func(cfg map[string]any) {
			profile := cfg["profiles"].([]any)[0].(map[string]any)
			plugins := profile["plugins"].(map[string]any)
			// The framework asks only the first placement generator.
			plugins["multiPoint"].(map[string]any)["disabled"] = []any{map[string]any{"name": "TopologyPlacementGenerator"}}
		})
	return c
}

// gpuNode creates a node with 8 GPUs in rack.
func (c *cluster) gpuNode(name, rack string) {
	c.t.Helper()
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("32"), v1.ResourceMemory: resource.MustParse("64Gi"),
		v1.ResourcePods: resource.MustParse("110"), gpu: resource.MustParse("8")}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"example.com/rack": rack}},
		Status: v1.NodeStatus{Allocatable: alloc, Capacity: alloc}}
	if _, err := c.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("create node %s: %v", name, err)
	}
}

// gang creates a gang PodGroup of minCount, constrained to the rack label
// (the policy's settings name another key: the group's wins), and its n
// pods of gpus GPUs each, and returns the pods' names.
func (c *cluster) gang(name string, minCount, n int, gpus string) []string {
	c.t.Helper()
	c.createPodGroup("default", name, minCount, "example.com/rack")
	var names []string
	for i := range n {
		pod := fmt.Sprintf("%s-%d", name, i)
		names = append(names, pod)
		c.pod(pod, func(p *v1.Pod) {
			group := name
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &group}
			q := resource.MustParse(gpus)
			p.Spec.Containers[0].Resources.Requests[gpu] = q
			p.Spec.Containers[0].Resources.Limits = v1.ResourceList{gpu: q}
		})
	}
	return names
}

// TestSmokePodGroupPlacedWithinOneRack: with the gates on (Kubernetes 1.36, 1.37), the
// topology policy places a gang within the tightest rack that holds it
// whole, and a gang that fits no rack stays pending with its reason.
func TestSmokePodGroupPlacedWithinOneRack(t *testing.T) {
	c := startGroupCluster(t, true)
	// r1: 2 nodes (room for 4 pods of 4 GPUs); r2: 3 nodes (6).
	for _, n := range []struct{ name, rack string }{{"r1-a", "r1"}, {"r1-b", "r1"}, {"r2-a", "r2"}, {"r2-b", "r2"}, {"r2-c", "r2"}} {
		c.gpuNode(n.name, n.rack)
	}
	racks := map[string]string{}
	for _, p := range c.gang("train", 4, 4, "4") {
		node := c.waitBound(p, 2*time.Minute)
		racks[p] = strings.SplitN(node, "-", 2)[0]
	}
	for p, r := range racks {
		if r != "r1" {
			t.Errorf("pod %s placed in rack %s; the gang fits the tighter r1 (%v)", p, r, racks)
		}
	}
	// Both racks hold the gang, so the scheduler reserved it on each and
	// undid each (the probe's Reserve checks that every member's cycle
	// carries its PodGroup and placement), then reserved the chosen r1
	// again to bind it (1.37.2's assumeSubtreeWithRevert): 12 Reserves, 8
	// Unreserves.
	if r, u := policyCalls(t, "groupprobe", "reserve"), policyCalls(t, "groupprobe", "unreserve"); r != 12 || u != 8 {
		t.Errorf("groupprobe: %v Reserve and %v Unreserve calls, want 12 and 8", r, u)
	}

	// r1 is full; r2 holds 3 pods of 8 GPUs: a gang of 4 fits no rack.
	big := c.gang("big", 4, 4, "8")
	msg := c.waitUnschedulable(big[0], 2*time.Minute)
	want := "topology: gang default/big needs 4 pods × 8 nvidia.com/gpu within one example.com/rack domain; the largest, r2, has room for 3 (2 domains)"
	if !strings.Contains(msg, want) {
		t.Errorf("FailedScheduling of %s: %q, want it to contain %q", big[0], msg, want)
	}
	for _, p := range big {
		c.stayUnbound(p, 0)
	}
}

// policyCalls sums the scheduler's count of a policy's calls at a point.
func policyCalls(t *testing.T, policy, point string) float64 {
	t.Helper()
	return metricValue(t, "wasmsched_policy_calls_total", map[string]string{"policy": policy, "point": point})
}

// TestSmokePodGroupGatesOff: with the gates off the API server drops the pods'
// schedulingGroup, no group cycle runs, the topology policy is never asked,
// and the pods are scheduled one by one as before.
func TestSmokePodGroupGatesOff(t *testing.T) {
	c := startGroupCluster(t, false)
	c.gpuNode("r1-a", "r1")
	c.pod("solo", func(p *v1.Pod) {
		group := "absent"
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &group}
	})
	if node := c.waitBound("solo", 2*time.Minute); node != "r1-a" {
		t.Errorf("solo bound to %q", node)
	}
}
