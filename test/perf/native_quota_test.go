package perf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/wasmsched/wasmsched/host/clusterctx"
	"github.com/wasmsched/wasmsched/host/eval"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// TestNativeQuotaTwin checks that QuotaNative gives the verdicts, reasons
// and scores of the quota example built as wasm, node by node: under the
// benchmark's settings for a pod of each kind of tenant there (guaranteed,
// borrowing, over its max), and under small settings where borrowing is
// refused because the other tenants' unused guaranteed share does not
// cover it. Tenant usage comes from the placed pods, on both sides. A
// benchmark comparing the two is only fair while this passes.
func TestNativeQuotaTwin(t *testing.T) {
	if _, err := os.Stat(filepath.Join(testwasm.Root(t), "examples", "quota", "main.go")); err != nil {
		t.Skip("no examples/quota in this tree")
	}
	wasm := testwasm.Bytes(t, "examples/quota")
	nodes := []*v1.Node{twinNode("n0", "4"), twinNode("n1", "4"), twinNode("n2", "8")}
	small := `{"elasticQuotas": false, "quotas": {` +
		`"a": {"min": {"cpu": "1"}, "max": {"cpu": "4"}, "weight": 2}, ` +
		`"b": {"min": {"cpu": "1"}, "max": {"cpu": "4"}}}}`
	for _, tc := range []struct {
		name     string
		settings string
		placed   []*v1.Pod
		pod      *v1.Pod
		// code is the verdict expected on every node; borrows, whether
		// the pod scores as a borrower (below 100).
		code    string
		borrows bool
	}{
		{"guaranteed", quotaSettings, benchPlaced(), twinPod("tenant-00", "p", "100m", ""), "Success", false},
		{"borrowing", quotaSettings, benchPlaced(), twinPod("tenant-12", "p", "100m", ""), "Success", true},
		{"over max", quotaSettings, benchPlaced(), twinPod(quotaOverTenant, "p", "100m", ""), "Unschedulable", false},
		{"no quota", quotaSettings, benchPlaced(), twinPod("elsewhere", "p", "100m", ""), "Success", false},
		{"borrow allowed", small, []*v1.Pod{twinPod("a", "x", "1500m", "n0")}, twinPod("a", "p", "500m", ""), "Success", true},
		{"borrow refused", small, []*v1.Pod{twinPod("a", "x", "2", "n0")}, twinPod("a", "p", "500m", ""), "Unschedulable", false},
		{"within min beside a borrower", small, []*v1.Pod{twinPod("a", "x", "1500m", "n0")}, twinPod("b", "p", "500m", ""), "Success", false},
		{"borrow all the others leave", small, nil, twinPod("b", "p", "2", ""), "Success", true},
		{"over max by one", small, nil, twinPod("b", "p", "4001m", ""), "Unschedulable", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ev, err := eval.Load(ctx, []eval.PolicySpec{{Name: "quota", Wasm: wasm, Settings: []byte(tc.settings)}})
			if err != nil {
				t.Fatal(err)
			}
			defer ev.Close(ctx)
			in := eval.Input{Pod: tc.pod, Nodes: nodes, Pods: tc.placed}
			rep, err := ev.Evaluate(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			infos, err := eval.NodeInfos(in)
			if err != nil {
				t.Fatal(err)
			}
			usage := clusterctx.NewUsage()
			for _, p := range tc.placed {
				usage.Set(p)
			}
			pl, err := newQuotaNative([]byte(tc.settings), usage)
			if err != nil {
				t.Fatal(err)
			}
			got := runQuotaNative(t, pl, tc.pod, infos)
			if len(rep.Nodes) != len(got) {
				t.Fatalf("wasm judged %d nodes, native %d", len(rep.Nodes), len(got))
			}
			for i, w := range rep.Nodes {
				g := got[i]
				if g.Name != w.Name || g.Code != w.Code || !slices.Equal(g.Reasons, nonNil(w.Reasons)) {
					t.Errorf("node %s: native %s %q, wasm %s %q", w.Name, g.Code, g.Reasons, w.Code, w.Reasons)
				}
				if deref(g.Score) != deref(w.Score) {
					t.Errorf("node %s: native score %v, wasm %v", w.Name, deref(g.Score), deref(w.Score))
				}
				if w.Code != tc.code || w.Code == "Success" && (w.Score == nil || (*w.Score < 100) != tc.borrows) {
					t.Errorf("node %s: wasm %s, score %v; the case expects %s, borrowing %v", w.Name, w.Code, deref(w.Score), tc.code, tc.borrows)
				}
			}
		})
	}
}

// benchPlaced are placed pods for the benchmark's settings: the over
// tenant at its max, a guaranteed and a borrowing tenant with a few pods.
func benchPlaced() []*v1.Pod {
	var out []*v1.Pod
	for i := range quotaOverPlaced {
		out = append(out, twinPod(quotaOverTenant, fmt.Sprintf("init-%d", i), "100m", "n0"))
	}
	for i := range 60 {
		out = append(out, twinPod("tenant-00", fmt.Sprintf("init-%d", i), "100m", "n1"))
		out = append(out, twinPod("tenant-12", fmt.Sprintf("init-%d", i), "100m", []string{"n0", "n2"}[i%2]))
	}
	return out
}

func twinNode(name, cpu string) *v1.Node {
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("32Gi"), v1.ResourcePods: resource.MustParse("110")}
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Capacity: rl, Allocatable: rl}}
}

// twinPod is a pod of tenant (its namespace) requesting cpu and 500Mi, on
// node when it is placed.
func twinPod(tenant, name, cpu, node string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: name, UID: types.UID(tenant + "/" + name)},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("500Mi")},
		}}}},
	}
}

// runQuotaNative runs QuotaNative as the framework would, and shapes its
// verdicts like host/eval's report.
func runQuotaNative(t *testing.T, pl *QuotaNative, pod *v1.Pod, infos []fwk.NodeInfo) []eval.NodeResult {
	t.Helper()
	ctx := context.Background()
	cs := framework.NewCycleState()
	_, pre := pl.PreFilter(ctx, cs, pod, infos)
	out := make([]eval.NodeResult, len(infos))
	for i, ni := range infos {
		out[i] = eval.NodeResult{Name: ni.Node().Name, Code: "Success", Reasons: []string{}}
		s := pre
		switch {
		case s.IsSkip():
			s = nil
		case s.IsSuccess():
			s = pl.Filter(ctx, cs, pod, ni)
		}
		if !s.IsSuccess() {
			out[i].Code, out[i].Reasons = s.Code().String(), s.Reasons()
			continue
		}
		v, st := pl.Score(ctx, cs, pod, ni)
		if !st.IsSuccess() {
			t.Fatalf("score %s: %v", ni.Node().Name, st)
		}
		out[i].Score = &v
	}
	return out
}
