//go:build !wasip1

package main

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
	"github.com/wasmsched/wasmsched/host/eval"
	hostpolicy "github.com/wasmsched/wasmsched/host/policy"
	"github.com/wasmsched/wasmsched/internal/hosttest"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func TestMain(m *testing.M) { testwasm.Main(m) }

// Every test runs against the module built by each toolchain (Go and
// TinyGo), and the builds must give the same verdicts, reasons and scores
// (testwasm.Agree).
const pkg = "examples/zone"

// scene is what testdata/ holds: the pod of pod.yaml, the nodes of
// nodes.yaml and the pods placed on them, pods.yaml.
func scene(t *testing.T) eval.Input {
	return hosttest.Input(t, "testdata/pod.yaml", "testdata/nodes.yaml", "testdata/pods.yaml")
}

const skewA = "zone: placing app=web in zone a would make skew 2 > maxSkew 1 (a=1, b=0, c=0)"

func TestEvalTestdata(t *testing.T) {
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
		ev := hosttest.Evaluator(t, "zone", wasm, hosttest.ReadFile(t, "testdata/settings.json"))
		rep := hosttest.Evaluate(t, ev, scene(t))
		hosttest.CheckReport(t, rep, "b-1", map[string]hosttest.Verdict{
			"a-1":    hosttest.Rejected(skewA),
			"a-2":    hosttest.Rejected(skewA),
			"b-1":    hosttest.Passes(100),
			"c-1":    hosttest.Passes(100),
			"d-1":    hosttest.Unresolvable("zone: zone d is denied"),
			"edge-1": hosttest.Passes(0),
		})
		if rep.Permit.Code != "Success" {
			t.Fatalf("permit %+v", rep.Permit)
		}
		return rep
	})
}

func TestEvalRequireZone(t *testing.T) {
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
		ev := hosttest.Evaluator(t, "zone", wasm, hosttest.ReadFile(t, "testdata/settings-require.json"))
		rep := hosttest.Evaluate(t, ev, scene(t))
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
		in := scene(t)
		// maxSkew 2 lets zone a in; it holds web-1, so it scores lowest.
		ev := hosttest.Evaluator(t, "zone", wasm, `{"deniedZones": ["d"], "maxSkew": 2}`)
		rep := hosttest.Evaluate(t, ev, in)
		hosttest.CheckReport(t, rep, "b-1", map[string]hosttest.Verdict{
			"a-1":    hosttest.Passes(0),
			"a-2":    hosttest.Passes(0),
			"b-1":    hosttest.Passes(100),
			"c-1":    hosttest.Passes(100),
			"d-1":    hosttest.Unresolvable("zone: zone d is denied"),
			"edge-1": hosttest.Passes(0),
		})
		return rep
	})
}

func TestEvalUngroupedPod(t *testing.T) {
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
		in := scene(t)
		in.Pod = st.MakePod().Namespace("default").Name("tool").UID("uid-tool").Obj()
		ev := hosttest.Evaluator(t, "zone", wasm, hosttest.ReadFile(t, "testdata/settings.json"))
		rep := hosttest.Evaluate(t, ev, in)
		hosttest.CheckReport(t, rep, "a-1", map[string]hosttest.Verdict{
			"a-1":    hosttest.Passes(0),
			"a-2":    hosttest.Passes(0),
			"b-1":    hosttest.Passes(0),
			"c-1":    hosttest.Passes(0),
			"d-1":    hosttest.Unresolvable("zone: zone d is denied"),
			"edge-1": hosttest.Passes(0),
		})
		return rep
	})
}

func TestEvalRejectsBadSettings(t *testing.T) {
	hosttest.RejectsSettings(t, pkg, "zone", []hosttest.BadSettings{
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
	p := hosttest.Policy(t, "zone", wasm, "")
	web := func(name string) *v1.Pod {
		return st.MakePod().Namespace("default").Name(name).UID("uid-"+name).Label("app", "web").Obj()
	}
	node := func(name, zone string, pods ...*v1.Pod) *framework.NodeInfo {
		return hosttest.NodeInfo(st.MakeNode().Name(name).Label(guest.LabelZone, zone).Obj(), pods...)
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
