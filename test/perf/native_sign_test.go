package perf

import (
	"context"
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host/clusterctx"
)

func testPod(ns string, gpus int64, annotations map[string]string, node string) *v1.Pod {
	req := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("500Mi")}
	if gpus > 0 {
		req[resourceGPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Annotations: annotations},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: req}}}},
	}
}

func signature(t *testing.T, p fwk.SignPlugin, pod *v1.Pod) string {
	t.Helper()
	fs, s := p.SignPod(context.Background(), pod)
	if !s.IsSuccess() || len(fs) != 1 {
		t.Fatalf("SignPod: %v, %d fragments", s, len(fs))
	}
	data, err := json.Marshal(fs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	return fs[0].Key + " " + string(data)
}

// TestNativeSignatures checks that the twins sign exactly what their rules
// read: pods that differ elsewhere sign alike, pods that differ in what is
// read do not.
func TestNativeSignatures(t *testing.T) {
	h100 := map[string]string{annotationProduct: "NVIDIA-H100-80GB-HBM3", "other": "x"}
	gpu, q := &Native{}, &QuotaNative{}
	for _, c := range []struct {
		name  string
		p     fwk.SignPlugin
		a, b  *v1.Pod
		equal bool
	}{
		{"gpu: other annotations and namespace", gpu, testPod("a", 1, h100, ""), testPod("b", 1, map[string]string{annotationProduct: "NVIDIA-H100-80GB-HBM3"}, ""), true},
		{"gpu: CPU pods ignore gpu annotations", gpu, testPod("a", 0, h100, ""), testPod("a", 0, nil, ""), true},
		{"gpu: product", gpu, testPod("a", 1, h100, ""), testPod("a", 1, map[string]string{annotationProduct: "NVIDIA-A100-SXM4-80GB"}, ""), false},
		{"gpu: empty annotation is not a missing one", gpu, testPod("a", 1, map[string]string{annotationProduct: ""}, ""), testPod("a", 1, nil, ""), false},
		{"gpu: GPU count", gpu, testPod("a", 1, nil, ""), testPod("a", 2, nil, ""), false},
		{"quota: annotations", q, testPod("a", 1, h100, ""), testPod("a", 1, nil, ""), true},
		{"quota: namespace", q, testPod("a", 0, nil, ""), testPod("b", 0, nil, ""), false},
		{"quota: requests", q, testPod("a", 0, nil, ""), testPod("a", 1, nil, ""), false},
	} {
		if got := signature(t, c.p, c.a) == signature(t, c.p, c.b); got != c.equal {
			t.Errorf("%s: equal signatures %v, want %v (%s, %s)", c.name, got, c.equal, signature(t, c.p, c.a), signature(t, c.p, c.b))
		}
	}
}

// TestNativeHints checks the twins' queueing hints on the events the churn
// workload makes and on those that can help.
func TestNativeHints(t *testing.T) {
	events, err := (&Native{}).EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fns := map[fwk.EventResource]map[fwk.ActionType]fwk.QueueingHintFn{}
	for _, e := range events {
		if fns[e.Event.Resource] == nil {
			fns[e.Event.Resource] = map[fwk.ActionType]fwk.QueueingHintFn{}
		}
		fns[e.Event.Resource][e.Event.ActionType] = e.QueueingHintFn
	}
	node := func(gpus int64, product string) *v1.Node {
		return &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{labelProduct: product}},
			Status:     v1.NodeStatus{Allocatable: v1.ResourceList{resourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}},
		}
	}
	rejected := testPod("pending", 1, map[string]string{annotationProduct: "NVIDIA-H100-80GB-HBM3"}, "")
	updated := testPod("pending", 1, map[string]string{annotationProduct: "NVIDIA-A100-SXM4-80GB"}, "")
	nodeUpdate := fwk.UpdateNodeLabel | fwk.UpdateNodeAllocatable
	for _, c := range []struct {
		name     string
		fn       fwk.QueueingHintFn
		old, new any
		want     fwk.QueueingHint
	}{
		{"node with GPUs added", fns[fwk.Node][fwk.Add], nil, node(8, "NVIDIA-H100-80GB-HBM3"), fwk.Queue},
		{"node without GPUs added", fns[fwk.Node][fwk.Add], nil, node(0, ""), fwk.QueueSkip},
		{"product label changed", fns[fwk.Node][nodeUpdate], node(8, "A"), node(8, "B"), fwk.Queue},
		{"other label changed", fns[fwk.Node][nodeUpdate], node(8, "A"), node(8, "A"), fwk.QueueSkip},
		{"GPU pod deleted", fns[assignedPod][fwk.Delete], testPod("x", 1, nil, "n"), nil, fwk.Queue},
		{"CPU pod deleted", fns[assignedPod][fwk.Delete], testPod("churn", 0, nil, "n"), nil, fwk.QueueSkip},
		{"own product changed", fns[targetPod][fwk.Update], rejected, updated, fwk.Queue},
		{"own other annotation changed", fns[targetPod][fwk.Update], rejected, testPod("pending", 1, map[string]string{annotationProduct: "NVIDIA-H100-80GB-HBM3", "x": "y"}, ""), fwk.QueueSkip},
	} {
		if c.fn == nil {
			t.Fatalf("%s: no hint registered", c.name)
		}
		got, err := c.fn(klog.Background(), rejected, c.old, c.new)
		if err != nil || got != c.want {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}

	q, err := newQuotaNative([]byte(quotaSettings), clusterctx.NewUsage())
	if err != nil {
		t.Fatal(err)
	}
	qevents, err := q.EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	freed := qevents[0].QueueingHintFn
	for ns, want := range map[string]fwk.QueueingHint{quotaTenants[3]: fwk.Queue, quotaOverTenant: fwk.Queue, "churn": fwk.QueueSkip} {
		if got, err := freed(klog.Background(), testPod(quotaOverTenant, 0, nil, ""), testPod(ns, 0, nil, "n"), nil); err != nil || got != want {
			t.Errorf("quota: pod of %s deleted: %v, %v; want %v", ns, got, err, want)
		}
	}
}
