package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/eval"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func TestMain(m *testing.M) { testwasm.Main(m) }

// demoProfile is the demo's three example policies with their settings
// and weights, modules built by the test.
func demoProfile(tb testing.TB) *Profile {
	tb.Helper()
	prof := &Profile{Name: "default-scheduler"}
	for _, p := range []struct {
		name, settings string
		weight         int64
	}{
		{"gpu", `{"strategy": "binpack", "reserveGPUNodes": true}`, 2},
		{"zone", `{"groupLabel": "app", "maxSkew": 1}`, 1},
		{"gang", `{"timeoutSeconds": 10}`, 1},
	} {
		wasm, err := os.ReadFile(testwasm.Path(tb, "examples/"+p.name))
		if err != nil {
			tb.Fatal(err)
		}
		prof.Policies = append(prof.Policies, Policy{Name: p.name, Weight: p.weight, FailurePolicy: "Fail",
			Revision: api.Revision{Key: p.name, Settings: json.RawMessage(p.settings)}, wasm: wasm})
	}
	return prof
}

// synthetic is a cluster of n nodes in three zones, one in ten with four
// GPUs, and two placed pods a node.
func synthetic(n int) *Cluster {
	cl := &Cluster{}
	for i := range n {
		zone := fmt.Sprintf("zone-%c", 'a'+i%3)
		labels := map[string]string{"topology.kubernetes.io/zone": zone, "kubernetes.io/hostname": fmt.Sprintf("node-%05d", i)}
		alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("32"), v1.ResourceMemory: resource.MustParse("128Gi"), v1.ResourcePods: resource.MustParse("110")}
		if i%10 == 0 {
			labels["nvidia.com/gpu.present"] = "true"
			labels["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-80GB"
			labels["nvidia.com/gpu.memory"] = "81920"
			labels["nvidia.com/gpu.count"] = "4"
			alloc["nvidia.com/gpu"] = resource.MustParse("4")
		}
		cl.Nodes = append(cl.Nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: labels["kubernetes.io/hostname"], Labels: labels},
			Status: v1.NodeStatus{Allocatable: alloc, Capacity: alloc}})
		for j := range 2 {
			cl.Pods = append(cl.Pods, testPod(fmt.Sprintf("p-%d-%d", i, j), cl.Nodes[i].Name, map[string]string{"app": fmt.Sprintf("app-%d", j)}, nil))
		}
	}
	return cl
}

func testPod(name, node string, labels, annotations map[string]string) *v1.Pod {
	req := v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("1Gi")}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "demo", UID: types.UID("uid-" + name), Labels: labels, Annotations: annotations},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: req}}}}}
}

func load(tb testing.TB) *Loaded {
	tb.Helper()
	c := &Client{}
	l, err := c.Load(context.Background(), demoProfile(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close(context.Background()) })
	return l
}

// Each policy's verdict, raw and normalised score per node, against the
// cluster without the pod itself; the reader's order and pages.
func TestExplainDetail(t *testing.T) {
	l := load(t)
	cl := synthetic(30)
	// A bound pod is judged as if unplaced, without itself.
	web := testPod("web", cl.Nodes[4].Name, map[string]string{"app": "web"}, nil)
	cl.Pods = append(cl.Pods, web)
	res, err := l.Explain(context.Background(), cl, nil, web)
	if err != nil {
		t.Fatal(err)
	}
	if res.Node != cl.Nodes[4].Name || res.Chosen == "" || res.TotalNodes != 30 || res.Note != Note {
		t.Fatalf("node %q chosen %q total %d", res.Node, res.Chosen, res.TotalNodes)
	}
	// gpu keeps GPU nodes for GPU pods (reserveGPUNodes): they score
	// lowest, last in the reader's order.
	if res.Feasible != 30 {
		t.Errorf("%d feasible, want 30", res.Feasible)
	}
	for _, n := range res.Nodes {
		if len(n.Policies) != 3 {
			t.Fatalf("node %s: %d policy verdicts", n.Name, len(n.Policies))
		}
		gpu := n.Policies[0]
		switch {
		case n.Code != "Success":
			if !strings.HasPrefix(strings.Join(n.Reasons, ""), "gpu: ") {
				t.Errorf("node %s rejected with %v", n.Name, n.Reasons)
			}
		case n.Score == nil || gpu.Raw == nil || gpu.Normalized == nil || n.Policies[1].Normalized == nil:
			t.Errorf("feasible node %s lacks scores: %+v", n.Name, n.Policies)
		}
	}
	page, total := res.Page(0, 5)
	if total != 30 || len(page.Nodes) != 5 || page.Nodes[0].Name != res.Chosen {
		t.Errorf("page: %d of %d, first %s (chosen %s)", len(page.Nodes), total, page.Nodes[0].Name, res.Chosen)
	}
	last, _ := res.Page(27, 5)
	for _, n := range last.Nodes {
		if len(last.Nodes) != 3 || n.Name[len(n.Name)-1] != '0' || *n.Policies[0].Normalized >= *page.Nodes[0].Policies[0].Normalized {
			t.Errorf("last page: %s gpu %d, want the GPU nodes (node-...0) scoring lowest", n.Name, *n.Policies[0].Normalized)
		}
	}
	// A GPU pod wanting a product no node has: every node rejected by gpu.
	h100 := testPod("train-h100", "", nil, map[string]string{"gpu.wasmsched.io/product": "NVIDIA-H100-80GB-HBM3"})
	h100.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
	res, err = l.Explain(context.Background(), cl, nil, h100)
	if err != nil {
		t.Fatal(err)
	}
	if res.Chosen != "" || res.Feasible != 0 || !strings.Contains(res.Summary(), "want NVIDIA-H100-80GB-HBM3") {
		t.Errorf("train-h100: chosen %q, %d feasible, %s", res.Chosen, res.Feasible, res.Summary())
	}
}

func TestParseOverride(t *testing.T) {
	for _, c := range []struct {
		in, kind string
		want     Override
		err      string
	}{
		{"gpu=sha256:abc", OverrideRevision, Override{Name: "gpu", Digest: "abc"}, ""},
		{"gpu=x.wasm", OverridePolicy, Override{Name: "gpu", File: "x.wasm"}, ""},
		{`gpu={ "a": 1 }`, OverrideSettings, Override{Name: "gpu", Settings: json.RawMessage(`{"a":1}`)}, ""},
		{"gpu", OverrideRevision, Override{}, `--revision "gpu" is not NAME=DIGEST`},
		{"=x", OverridePolicy, Override{}, `--policy "=x" is not NAME=FILE.wasm`},
		{"gpu={", OverrideSettings, Override{}, `--settings for gpu: not valid JSON: unexpected end of JSON input`},
	} {
		got, err := ParseOverride(c.in, c.kind)
		if (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) || got.Name != c.want.Name ||
			got.Digest != c.want.Digest || got.File != c.want.File || string(got.Settings) != string(c.want.Settings) {
			t.Errorf("ParseOverride(%q): %+v, %v", c.in, got, err)
		}
	}
}

// One pod explained at 500 and 5000 nodes (two placed pods a node, the
// demo's three policies): the cost of `wasmsched explain` beyond reading
// the cluster.
//
// Every run of explain loads fresh instances, so its first call sends the
// whole snapshot to policies that keep every node (zone): at 5000 nodes
// that call can pass the default 200ms deadline on a busy machine. The
// benchmark gives the policies 2s, measures the first evaluation of a
// fresh load (what one `wasmsched explain` pays) and the ones after it.
func BenchmarkExplain(b *testing.B) {
	prof := demoProfile(b)
	for i := range prof.Policies {
		prof.Policies[i].Revision.Timeout = &metav1.Duration{Duration: 2 * time.Second}
	}
	for _, n := range []int{500, 5000} {
		cl := synthetic(n)
		web := testPod("web", "", map[string]string{"app": "web"}, nil)
		explain := func(b *testing.B, l *Loaded) {
			res, err := l.Explain(context.Background(), cl, nil, web)
			if err != nil || res.Chosen == "" {
				b.Fatal(n, err, res.Summary())
			}
		}
		b.Run(fmt.Sprintf("first/nodes=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				l, err := (&Client{}).Load(context.Background(), prof)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				explain(b, l)
				b.StopTimer()
				l.Close(context.Background())
				b.StartTimer()
			}
		})
		b.Run(fmt.Sprintf("again/nodes=%d", n), func(b *testing.B) {
			l, err := (&Client{}).Load(context.Background(), prof)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close(context.Background())
			for b.Loop() {
				explain(b, l)
			}
		})
	}
}

var _ = eval.PolicyVerdict{}
