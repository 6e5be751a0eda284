package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// withVersion returns module with a custom section appended that holds n:
// a valid module that behaves exactly as module does, under another digest,
// as a rebuild of the same policy would be.
func withVersion(module []byte, n byte) []byte {
	const name = "wasmsched-test-version"
	payload := binary.AppendUvarint(nil, uint64(len(name))) // LEB128
	payload = append(append(payload, name...), n)
	out := append(append([]byte(nil), module...), 0) // custom section id
	out = binary.AppendUvarint(out, uint64(len(payload)))
	return append(out, payload...)
}

// bigNode creates a node that holds a thousand pods of the load test.
func (c *cluster) bigNode(name string, labels map[string]string, gpus int) {
	c.t.Helper()
	n := c.node(name, labels)
	alloc := n.Status.Allocatable
	alloc[v1.ResourcePods] = resource.MustParse("1000")
	alloc[v1.ResourceCPU] = resource.MustParse("100")
	alloc[v1.ResourceMemory] = resource.MustParse("1Ti")
	if gpus > 0 {
		alloc["nvidia.com/gpu"] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	n.Status.Capacity = alloc
	if _, err := c.client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// loadPod is pod i of the load test: every tenth a space workload (edge
// policy), every tenth a GPU pod (gpu policy), the rest in four groups the
// zone policy spreads.
func loadPod(i int) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("load-%04d", i), Namespace: "default"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}}},
	}
	switch i % 10 {
	case 0:
		p.Annotations = map[string]string{"type": "space"}
	case 1:
		gpu := v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = gpu["nvidia.com/gpu"]
		p.Spec.Containers[0].Resources.Limits = gpu
	default:
		p.Labels = map[string]string{"app": fmt.Sprintf("web-%d", i%4)}
	}
	return p
}

var klogTime = regexp.MustCompile(`(?m)^I\d{4} (\d{2}:\d{2}:\d{2}\.\d{6}) .*"Successfully bound pod to node"`)

// bindSpan is the time between the first and the last binding in a
// replica's log (klog's time of day; a run spans less than a day).
func (r *replica) bindSpan() time.Duration {
	m := klogTime.FindAllStringSubmatch(r.out.String(), -1)
	if len(m) < 2 {
		return 0
	}
	first, err1 := time.Parse("15:04:05.000000", m[0][1])
	last, err2 := time.Parse("15:04:05.000000", m[len(m)-1][1])
	if err1 != nil || err2 != nil {
		return 0
	}
	d := last.Sub(first)
	if d < 0 {
		d += 24 * time.Hour
	}
	return d
}

// Load: 2000 pods stream into a cluster whose scheduler (the binary, with
// leader election) runs three example policies from
// ConfigMaps, while the policies are replaced six times by uploads of new
// versions. Every pod is bound exactly once, every placement obeys all
// three policies (none in the denied zone, space workloads on edge nodes
// only, GPU pods on GPU nodes only, each group spread over the allowed
// zones within maxSkew), and the race detector, when the binary has it
// (EnvRace), reports nothing.
func TestLoadWithReloads(t *testing.T) {
	const pods = 2000
	c := startCluster(t, nil)
	c.namespace(policyNamespace)
	zoneOf := map[string]string{}
	for _, z := range []string{"a", "b", "c", "d"} {
		for i := 1; i <= 2; i++ {
			name := fmt.Sprintf("zone-%s-%d", z, i)
			c.bigNode(name, labels("topology.kubernetes.io/zone", z), 0)
			zoneOf[name] = z
		}
	}
	for _, z := range []string{"a", "b"} {
		name := "gpu-" + z
		c.bigNode(name, labels("topology.kubernetes.io/zone", z, "nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"), 200)
		zoneOf[name] = z
	}
	c.bigNode("edge-1", labels("kubernetes.io/role", "edge"), 0)
	c.bigNode("edge-2", labels("kubernetes.io/role", "edge"), 0)

	// Each policy alternates between its build and a second version.
	names := []string{"edge", "gpu", "zone"}
	versions := map[string][2][]byte{}
	var all [][]byte
	for _, n := range names {
		m := testwasm.Bytes(t, "examples/"+n)
		versions[n] = [2][]byte{m, withVersion(m, 1)}
		all = append(all, versions[n][0], versions[n][1])
	}
	precompile(t, all...)
	for _, n := range names {
		c.upload(n, versions[n][0])
	}
	var policies []policy
	for _, n := range names {
		p := policy{Name: n, ConfigMap: n, Timeout: "1s"}
		if n == "zone" {
			p.Settings = `{"deniedZones": ["d"], "maxSkew": 1}`
		}
		policies = append(policies, p)
	}
	r := startReplica(t, "kube-scheduler", electedConfig(t, c.kubeconfig, policies, steadyLease, 200))
	c.live = append(c.live, r)
	for _, n := range names {
		r.running()
		c.waitActive(n, source.Digest(versions[n][0]), 120*time.Second)
	}

	// The pods come in seven batches. Before each of the last six, a policy
	// is replaced (each in turn by its second version, then back): the
	// batch is created and scheduled while the new version loads and
	// swaps in, and the next upload waits until it serves.
	const batches = 7
	create := func(b int) {
		var wg sync.WaitGroup
		errs := make(chan error, pods)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := b*pods/batches + w; i < (b+1)*pods/batches; i += 4 {
					if _, err := c.client.CoreV1().Pods("default").Create(context.Background(), loadPod(i), metav1.CreateOptions{}); err != nil {
						errs <- fmt.Errorf("create pod %d: %w", i, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	start := time.Now()
	create(0)
	var pendingAtReload []int
	for b := 1; b < batches; b++ {
		n := names[(b-1)%3]
		module := versions[n][1-(b-1)/3]
		list, err := c.client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName="})
		if err != nil {
			t.Fatal(err)
		}
		pendingAtReload = append(pendingAtReload, len(list.Items))
		c.upload(n, module)
		create(b)
		r.running()
		c.waitActive(n, source.Digest(module), 180*time.Second)
	}
	nodes := c.waitAllBound(pods, 10*time.Minute)
	elapsed := time.Since(start)
	waitFor(t, "the scheduler logs every binding", 60*time.Second, func() bool { return len(r.bindings()) >= pods })
	events := c.scheduledEvents()
	r.stop()

	// Exactly once, where the policies allow.
	bound := r.bindings()
	perGroupZone := map[string]map[string]int{}
	for i := 0; i < pods; i++ {
		p := loadPod(i)
		node := nodes[p.Name]
		if got := bound["default/"+p.Name]; len(got) != 1 || got[0] != node {
			t.Errorf("pod %s is on %s; the scheduler's log shows bindings %v, want exactly one there", p.Name, node, got)
		}
		if events[p.Name] > 1 {
			t.Errorf("pod %s has %d Scheduled events, want at most one", p.Name, events[p.Name])
		}
		zone := zoneOf[node]
		switch {
		case zone == "d":
			t.Errorf("pod %s is on %s, in the denied zone d", p.Name, node)
		case i%10 == 0 && node != "edge-1" && node != "edge-2":
			t.Errorf("space workload %s is on %s, not an edge node", p.Name, node)
		case i%10 == 1 && node != "gpu-a" && node != "gpu-b":
			t.Errorf("GPU pod %s is on %s, not a GPU node", p.Name, node)
		case i%10 > 1 && zone != "":
			g := p.Labels["app"]
			if perGroupZone[g] == nil {
				perGroupZone[g] = map[string]int{"a": 0, "b": 0, "c": 0}
			}
			perGroupZone[g][zone]++
		}
	}
	for g, counts := range perGroupZone {
		lo, hi := pods, 0
		for _, n := range counts {
			lo, hi = min(lo, n), max(hi, n)
		}
		if hi-lo > 1 {
			t.Errorf("group app=%s is spread %v over the allowed zones: skew %d > maxSkew 1", g, counts, hi-lo)
		}
	}
	if lines := r.conflicts(); len(lines) > 0 {
		t.Errorf("the scheduler tried to bind pods that were already bound: %v", lines)
	}
	span := r.bindSpan()
	rate := 0.0
	if span > 0 {
		rate = float64(pods-1) / span.Seconds()
	}
	t.Logf("%d pods bound in %v from the first creation (%.0f pods/s between the first and last binding); "+
		"unbound pods when each of the 6 reloads was uploaded: %v; per group and zone: %v",
		pods, elapsed.Round(100*time.Millisecond), rate, pendingAtReload, perGroupZone)
}
