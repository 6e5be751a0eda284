//go:build !wasip1

package main

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/eval"
	hostpolicy "github.com/wasmsched/wasmsched/host/policy"
	"github.com/wasmsched/wasmsched/internal/evalcheck"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func TestMain(m *testing.M) { testwasm.Main(m) }

// Every test runs against the module built by each toolchain (Go and
// TinyGo), and the builds must give the same verdicts, reasons and scores
// (testwasm.Agree).
const pkg = "examples/zone"

// load loads the module wasm with settings, the way `wasmsched eval` does.
func load(t *testing.T, wasm []byte, settings string) *eval.Evaluator {
	t.Helper()
	ev, err := eval.Load(context.Background(), []eval.PolicySpec{{Name: "zone", Wasm: wasm, Settings: []byte(settings)}})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { ev.Close(context.Background()) })
	return ev
}

func readInput(t *testing.T) eval.Input {
	t.Helper()
	var (
		in  eval.Input
		err error
	)
	if in.Pod, err = eval.ReadPod("testdata/pod.yaml"); err != nil {
		t.Fatal(err)
	}
	if in.Nodes, err = eval.ReadNodes("testdata/nodes.yaml"); err != nil {
		t.Fatal(err)
	}
	if in.Pods, err = eval.ReadPods("testdata/pods.yaml"); err != nil {
		t.Fatal(err)
	}
	return in
}

func settingsFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type verdict struct {
	code   string
	reason string
	score  int64 // -1: no score
}

func check(t *testing.T, rep *eval.Report, want map[string]verdict) {
	t.Helper()
	for _, n := range rep.Nodes {
		w, ok := want[n.Name]
		if !ok {
			t.Errorf("unexpected node %s", n.Name)
			continue
		}
		if n.Code != w.code || strings.Join(n.Reasons, "; ") != w.reason {
			t.Errorf("%s: %s %q, want %s %q", n.Name, n.Code, n.Reasons, w.code, w.reason)
		}
		switch {
		case w.score < 0 && n.Score != nil:
			t.Errorf("%s: score %d, want none", n.Name, *n.Score)
		case w.score >= 0 && (n.Score == nil || *n.Score != w.score):
			t.Errorf("%s: score %v, want %d", n.Name, n.Score, w.score)
		}
	}
}

const skewA = "zone: placing app=web in zone a would make skew 2 > maxSkew 1 (a=1, b=0, c=0)"

func TestEvalTestdata(t *testing.T) {
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
		rep, err := load(t, wasm, settingsFile(t, "settings.json")).Evaluate(context.Background(), readInput(t))
		if err != nil {
			t.Fatal(err)
		}
		check(t, rep, map[string]verdict{
			"a-1":    {"Unschedulable", skewA, -1},
			"a-2":    {"Unschedulable", skewA, -1},
			"b-1":    {"Success", "", 100},
			"c-1":    {"Success", "", 100},
			"d-1":    {"UnschedulableAndUnresolvable", "zone: zone d is denied", -1},
			"edge-1": {"Success", "", 0},
		})
		if rep.Selected != "b-1" || rep.Permit.Code != "Success" {
			t.Fatalf("selected %q, permit %+v", rep.Selected, rep.Permit)
		}
		return rep
	})
}

func TestEvalRequireZone(t *testing.T) {
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
		rep, err := load(t, wasm, settingsFile(t, "settings-require.json")).Evaluate(context.Background(), readInput(t))
		if err != nil {
			t.Fatal(err)
		}
		if got := rep.SortedNames("UnschedulableAndUnresolvable"); !slices.Equal(got, []string{"d-1", "edge-1"}) {
			t.Fatalf("unresolvable %v, want [d-1 edge-1]", got)
		}
		for _, n := range rep.Nodes {
			if n.Name == "edge-1" && n.Reasons[0] != "zone: node edge-1 has no topology.kubernetes.io/zone label" {
				t.Fatalf("edge-1: %q", n.Reasons)
			}
		}
		return rep
	})
}

func TestEvalScoresPreferEmptierZones(t *testing.T) {
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
		in := readInput(t)
		// maxSkew 2 lets zone a in; it holds web-1, so it scores lowest.
		rep, err := load(t, wasm, `{"deniedZones": ["d"], "maxSkew": 2}`).Evaluate(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		check(t, rep, map[string]verdict{
			"a-1":    {"Success", "", 0},
			"a-2":    {"Success", "", 0},
			"b-1":    {"Success", "", 100},
			"c-1":    {"Success", "", 100},
			"d-1":    {"UnschedulableAndUnresolvable", "zone: zone d is denied", -1},
			"edge-1": {"Success", "", 0},
		})
		return rep
	})
}

func TestEvalUngroupedPod(t *testing.T) {
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
		in := readInput(t)
		in.Pod = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "tool", Namespace: "default", UID: "uid-tool"}}
		rep, err := load(t, wasm, settingsFile(t, "settings.json")).Evaluate(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		check(t, rep, map[string]verdict{
			"a-1":    {"Success", "", 0},
			"a-2":    {"Success", "", 0},
			"b-1":    {"Success", "", 0},
			"c-1":    {"Success", "", 0},
			"d-1":    {"UnschedulableAndUnresolvable", "zone: zone d is denied", -1},
			"edge-1": {"Success", "", 0},
		})
		return rep
	})
}

func TestEvalRejectsBadSettings(t *testing.T) {
	evalcheck.RejectsSettings(t, pkg, "zone", []evalcheck.BadSettings{
		{Settings: `{"maxSkew": 0}`, Want: `"maxSkew" must be at least 1`},
		{Settings: `{"groupLabel": ""}`, Want: `"groupLabel" must not be empty`},
		{Settings: `{"requireZones": true}`, Want: `unknown field "requireZones"`},
	})
}

// TestFilterOnPreemptionCopies drives Filter through host/policy with the
// scheduler's own NodeInfo values: preemption evaluates a copy of a node
// with victims removed, and the policy must judge that copy, not the
// cycle's counts.
func TestFilterOnPreemptionCopies(t *testing.T) {
	testwasm.Agree(t, pkg, filterOnPreemptionCopies)
}

func filterOnPreemptionCopies(t *testing.T, wasm []byte) []hostpolicy.Status {
	ctx := context.Background()
	p, err := hostpolicy.Load(ctx, hostpolicy.Options{Name: "zone", Wasm: wasm, MaxInstances: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	web := func(name string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"}}}
	}
	node := func(name, zone string, pods ...*v1.Pod) *framework.NodeInfo {
		ni := framework.NewNodeInfo(pods...)
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"topology.kubernetes.io/zone": zone}}})
		return ni
	}
	victim := web("web-2")
	a := node("a-1", "a", web("web-1"), victim)
	nodes := []fwk.NodeInfo{a, node("b-1", "b", web("web-3"))}
	c := hostpolicy.NewCycle(web("web-9"), nodes)

	s, err := p.Filter(ctx, c, a)
	if err != nil || s.Code != abiv1.Code_CODE_UNSCHEDULABLE ||
		s.Reasons[0] != "zone: placing app=web in zone a would make skew 2 > maxSkew 1 (a=2, b=1)" {
		t.Fatalf("a-1: %+v %v", s, err)
	}
	copied := a.SnapshotConcrete()
	if err := copied.RemovePod(klog.Background(), victim); err != nil {
		t.Fatal(err)
	}
	s2, err := p.Filter(ctx, c, copied)
	if err != nil || !s2.IsSuccess() {
		t.Fatalf("a-1 without web-2: %+v %v", s2, err)
	}
	return []hostpolicy.Status{s, s2}
}
