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

// build says how a scenario's policy module is built: the standard Go
// toolchain (as `make examples`) or TinyGo (as `make examples-tinygo`).
// The TinyGo variants of the scenarios, Test*TinyGo, are what `make
// test-tinygo` runs; without the toolchain they skip, or fail under
// WASMSCHED_REQUIRE_TINYGO=1.
type build int

const (
	goBuild build = iota
	tinygoBuild
)

// policy returns the policy named name from examples/<name>, built by b.
func (b build) policy(t *testing.T, name, settings string) policy {
	t.Helper()
	p := policy{Name: name, Package: "examples/" + name, Settings: settings}
	if b == tinygoBuild {
		p.File = testwasm.TinyGoPath(t, p.Package)
	}
	return p
}

// gpuNode creates a node with gpus GPUs of product, labelled as GPU Feature
// Discovery labels it, and with the extra labels (key, value, ...).
func gpuNode(c *cluster, name, product, memMiB string, gpus int64, extra ...string) {
	c.t.Helper()
	n := c.node(name, labels(append([]string{"nvidia.com/gpu.present", "true", "nvidia.com/gpu.product", product,
		"nvidia.com/gpu.memory", memMiB, "nvidia.com/gpu.sharing-strategy", "none"}, extra...)...))
	n.Status.Allocatable["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	n.Status.Capacity["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	if _, err := c.client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func requestGPUs(n int64) func(*v1.Pod) {
	return func(p *v1.Pod) {
		q := *resource.NewQuantity(n, resource.DecimalSI)
		p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = q
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{"nvidia.com/gpu": q}
	}
}

func annotate(kv ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		for k, v := range labels(kv...) {
			p.Annotations[k] = v
		}
	}
}

func label(kv ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for k, v := range labels(kv...) {
			p.Labels[k] = v
		}
	}
}

func nodeSelector(kv ...string) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.NodeSelector = labels(kv...) }
}

// gpu: GPU pods go to nodes with the right product and free GPUs, packed
// tight; CPU pods stay off GPU nodes; a pod no node can serve stays Pending
// with the policy's reason.
func TestExampleGPU(t *testing.T)       { exampleGPU(t, goBuild) }
func TestExampleGPUTinyGo(t *testing.T) { exampleGPU(t, tinygoBuild) }

func exampleGPU(t *testing.T, b build) {
	c := startCluster(t, []policy{b.policy(t, "gpu", "")})
	gpuNode(c, "a100", "NVIDIA-A100-SXM4-80GB", "81920", 4)
	gpuNode(c, "l4", "NVIDIA-L4", "23034", 2)
	c.node("cpu", nil)
	c.pod("train", requestGPUs(3), annotate("gpu.wasmsched.io/product", "NVIDIA-A100-SXM4-80GB"))
	if n := c.waitBound("train", 30*time.Second); n != "a100" {
		t.Fatalf("train on %s, want a100", n)
	}
	// binpack: one more GPU leaves a100 with 0 free and l4 with 1: a100 is
	// the tighter fit.
	c.pod("more", requestGPUs(1))
	if n := c.waitBound("more", 30*time.Second); n != "a100" {
		t.Fatalf("more on %s, want a100 (binpack)", n)
	}
	c.pod("web")
	if n := c.waitBound("web", 30*time.Second); n != "cpu" {
		t.Fatalf("web on %s, want cpu (GPU nodes reserved)", n)
	}
	c.pod("h100", requestGPUs(1), annotate("gpu.wasmsched.io/product", "NVIDIA-H100-80GB-HBM3"))
	msg := c.waitUnschedulable("h100", 30*time.Second)
	if !strings.Contains(msg, "gpu: wrong GPU product: want NVIDIA-H100-80GB-HBM3, node has NVIDIA-L4") {
		t.Fatalf("FailedScheduling %q lacks the gpu reason", msg)
	}
}

// zone: a denied zone receives nothing, pods of a group spread one per zone.
func TestExampleZone(t *testing.T) {
	c := startCluster(t, []policy{{Name: "zone", Package: "examples/zone", Settings: `{"deniedZones": ["d"], "maxSkew": 1}`}})
	for _, z := range []string{"a", "b", "c", "d"} {
		c.node("node-"+z, labels("topology.kubernetes.io/zone", z))
	}
	zones := map[string]int{}
	for _, p := range []string{"web-1", "web-2", "web-3"} {
		c.pod(p, label("app", "web"))
		n := c.waitBound(p, 30*time.Second) // one at a time: each sees the others
		zones[n]++
	}
	if len(zones) != 3 || zones["node-d"] != 0 {
		t.Fatalf("web pods on %v, want one each on node-a, node-b, node-c", zones)
	}
	c.pod("pinned-to-d", nodeSelector("topology.kubernetes.io/zone", "d"))
	msg := c.waitUnschedulable("pinned-to-d", 30*time.Second)
	if !strings.Contains(msg, "zone: zone d is denied") {
		t.Fatalf("FailedScheduling %q lacks the zone reason", msg)
	}
}

// gang: a group of 4 on a cluster with room for 3 stays entirely unbound,
// and binds entirely once a fourth node appears.
func TestExampleGang(t *testing.T)       { exampleGang(t, goBuild) }
func TestExampleGangTinyGo(t *testing.T) { exampleGang(t, tinygoBuild) }

func exampleGang(t *testing.T, b build) {
	c := startCluster(t, []policy{b.policy(t, "gang", `{"timeoutSeconds": 3}`)})
	onePodNode := func(name string) {
		n := c.node(name, nil)
		n.Status.Allocatable[v1.ResourcePods] = resource.MustParse("1")
		if _, err := c.client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		onePodNode(n)
	}
	members := []string{"g-0", "g-1", "g-2", "g-3"}
	for _, m := range members {
		c.pod(m, label("gang.wasmsched.io/name", "g"), annotate("gang.wasmsched.io/min-available", "4"))
	}
	time.Sleep(8 * time.Second) // more than two Permit timeouts
	for _, m := range members {
		p, err := c.client.CoreV1().Pods("default").Get(context.Background(), m, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			t.Fatalf("%s bound to %s while the gang cannot be complete", m, p.Spec.NodeName)
		}
	}
	onePodNode("n4")
	nodes := map[string]bool{}
	for _, m := range members {
		nodes[c.waitBound(m, 60*time.Second)] = true
	}
	if len(nodes) != 4 {
		t.Fatalf("gang on nodes %v, want four distinct nodes", nodes)
	}
}

// edge: space workloads only on edge nodes; other pods prefer the rest.
func TestExampleEdge(t *testing.T) {
	c := startCluster(t, []policy{{Name: "edge", Package: "examples/edge"}})
	c.node("ground-1", labels("kubernetes.io/role", "edge"))
	c.node("dc-1", labels("kubernetes.io/role", "worker"))
	c.pod("decoder", annotate("type", "space"))
	if n := c.waitBound("decoder", 30*time.Second); n != "ground-1" {
		t.Fatalf("decoder on %s, want ground-1", n)
	}
	c.pod("web")
	if n := c.waitBound("web", 30*time.Second); n != "dc-1" {
		t.Fatalf("web on %s, want dc-1", n)
	}
	c.pod("misplaced", annotate("type", "space"), nodeSelector("kubernetes.io/role", "worker"))
	msg := c.waitUnschedulable("misplaced", 30*time.Second)
	if !strings.Contains(msg, "edge: not an edge node") {
		t.Fatalf("FailedScheduling %q lacks the edge reason", msg)
	}
}
