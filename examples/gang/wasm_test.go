//go:build !wasip1

package main

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/eval"
	hostpolicy "github.com/wasmsched/wasmsched/host/policy"
	"github.com/wasmsched/wasmsched/internal/hosttest"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func TestMain(m *testing.M) { testwasm.Main(m) }

// Every test runs against the module built by each toolchain (Go and
// TinyGo), and the builds must give the same verdicts, reasons and actions
// (testwasm.Agree).
const pkg = "examples/gang"

var ctx = context.Background()

// evaluate runs the testdata scene through host/eval, as `wasmsched eval`
// does, with the given pod and placed pods files.
func evaluate(t *testing.T, wasm []byte, podFile, podsFile string) *eval.Report {
	t.Helper()
	ev := hosttest.Evaluator(t, "gang", wasm, hosttest.ReadFile(t, "testdata/settings.json"))
	return hosttest.Evaluate(t, ev, hosttest.Input(t, "testdata/"+podFile, "testdata/nodes.yaml", "testdata/"+podsFile))
}

func TestEvalWaitsForTheGang(t *testing.T) {
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
		rep := evaluate(t, wasm, "pod.yaml", "pods.yaml")
		if got := rep.SortedNames("Success"); !slices.Equal(got, []string{"node-1", "node-2"}) {
			t.Fatalf("feasible %v", got)
		}
		want := []string{"gang: group g1 has 2 of 3 members ready, waiting for 1 more"}
		if rep.Permit.Code != "Wait" || !slices.Equal(rep.Permit.Reasons, want) || rep.Permit.Wait != "1m0s" {
			t.Fatalf("permit %+v, want Wait %q for 1m0s", rep.Permit, want)
		}
		return rep
	})
}

func TestEvalCompleteGangBinds(t *testing.T) {
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
		rep := evaluate(t, wasm, "pod.yaml", "pods-complete.yaml")
		if rep.Permit.Code != "Success" || len(rep.Permit.Reasons) != 0 || rep.Selected == "" {
			t.Fatalf("permit %+v on %q, want Success", rep.Permit, rep.Selected)
		}
		return rep
	})
}

func TestEvalMalformedAnnotation(t *testing.T) {
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
		rep := evaluate(t, wasm, "pod-malformed.yaml", "pods.yaml")
		want := `gang: annotation gang.wasmsched.io/min-available is "three", want a positive integer`
		for _, n := range rep.Nodes {
			if n.Code != "UnschedulableAndUnresolvable" || len(n.Reasons) != 1 || n.Reasons[0] != want {
				t.Errorf("%s: %s %q, want UnschedulableAndUnresolvable %q", n.Name, n.Code, n.Reasons, want)
			}
		}
		if rep.Selected != "" {
			t.Fatalf("selected %q", rep.Selected)
		}
		return rep
	})
}

func TestEvalRejectsBadSettings(t *testing.T) {
	hosttest.RejectsSettings(t, pkg, "gang", []hosttest.BadSettings{
		{Settings: `{"timeoutSeconds": 3600}`, Want: `"timeoutSeconds" must be between 1 and 900`},
	})
}

// The tests below drive Permit and Unreserve through host/policy, which can
// pass waiting pods (host/eval cannot).

// gangPod is the pod name of ns as the scheduler has it, a member of group
// with min-available min; an empty min makes it a pod outside gangs.
func gangPod(ns, name, group, min string) *v1.Pod {
	p := st.MakePod().Namespace(ns).Name(name).UID("uid-" + name)
	if min != "" {
		p.Label(LabelName, group).Annotation(AnnotationMinAvailable, min)
	}
	return p.Obj()
}

// waitingPod is a member of group, with min-available min, waiting at
// Permit on n1, as the host passes it to the policy.
func waitingPod(ns, name, group, min string) *abiv1.WaitingPod {
	return inGroup(ns, name, group).Annotation(AnnotationMinAvailable, min).Waiting("n1").Message()
}

// nodeInfo is node name with pods on it, as the scheduler's snapshot has it.
func nodeInfo(name string, pods ...*v1.Pod) fwk.NodeInfo {
	return hosttest.NodeInfo(st.MakeNode().Name(name).Obj(), pods...)
}

func TestPermitAllowsTheGangTogether(t *testing.T) {
	testwasm.Agree(t, pkg, permitAllowsTheGangTogether)
}

func permitAllowsTheGangTogether(t *testing.T, wasm []byte) []hostpolicy.PermitResult {
	p := hosttest.Policy(t, "gang", wasm, `{"timeoutSeconds": 20}`)
	bound := gangPod("ml", "b1", "g1", "4")
	bound.Spec.NodeName = "n2"
	nodes := []fwk.NodeInfo{nodeInfo("n1"), nodeInfo("n2", bound)}
	waiting := []*abiv1.WaitingPod{
		waitingPod("ml", "w1", "g1", "4"),
		waitingPod("ml", "o1", "g2", "2"),
		waitingPod("research", "x1", "g1", "4"),
		waitingPod("ml", "w2", "g1", "4"),
	}

	// w3 with w1 and w2 waiting: 3 of 4, wait.
	first := gangPod("ml", "w3", "g1", "4")
	c := hostpolicy.NewCycle(first, nodes[:1])
	wait, err := p.Permit(ctx, c, nodes[0], waiting)
	if err != nil {
		t.Fatal(err)
	}
	if wait.Status.Code != abiv1.Code_CODE_WAIT || wait.Timeout != 20*time.Second || len(wait.Actions) != 0 ||
		wait.Status.Reasons[0] != "gang: group g1 has 3 of 4 members ready, waiting for 1 more" {
		t.Fatalf("3 of 4: %+v", wait)
	}

	// With b1 bound on n2 the gang is complete: w3 passes and w1, w2 are
	// allowed. The host lists w3 too here; it must not act on it.
	c = hostpolicy.NewCycle(first, nodes)
	res, err := p.Permit(ctx, c, nodes[0], append(waiting, waitingPod("ml", "w3", "g1", "4")))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status.Code != abiv1.Code_CODE_SUCCESS || len(res.Actions) != 2 ||
		res.Actions[0].Uid != "uid-w1" || !res.Actions[0].Allow || res.Actions[1].Uid != "uid-w2" || !res.Actions[1].Allow {
		t.Fatalf("4 of 4: %+v", res)
	}
	return []hostpolicy.PermitResult{wait, res}
}

func TestUnreserveReleasesTheGang(t *testing.T) {
	testwasm.Agree(t, pkg, unreserveReleasesTheGang)
}

func unreserveReleasesTheGang(t *testing.T, wasm []byte) []any {
	p := hosttest.Policy(t, "gang", wasm, "")
	nodes := []fwk.NodeInfo{nodeInfo("n1")}
	waiting := []*abiv1.WaitingPod{
		waitingPod("ml", "w1", "g1", "4"),
		waitingPod("ml", "o1", "g2", "2"),
		waitingPod("ml", "w2", "g1", "4"),
	}
	c := hostpolicy.NewCycle(gangPod("ml", "w3", "g1", "4"), nodes)
	s, acts, err := p.NodeCall(ctx, abiv1.Point_POINT_UNRESERVE, c, nodes[0], waiting)
	if err != nil || !s.IsSuccess() {
		t.Fatalf("unreserve: %+v %v", s, err)
	}
	reason := "gang: group g1 released: 3 of 4 members ready when ml/w3 timed out or failed"
	if len(acts) != 2 || acts[0].Uid != "uid-w1" || acts[1].Uid != "uid-w2" {
		t.Fatalf("actions %+v, want rejections of w1 and w2", acts)
	}
	for _, a := range acts {
		if a.Allow || a.Reason != reason {
			t.Fatalf("action %+v, want a rejection with %q", a, reason)
		}
	}

	// A pod outside gangs neither waits nor releases anyone.
	c = hostpolicy.NewCycle(gangPod("ml", "web", "", ""), nodes)
	res, err := p.Permit(ctx, c, nodes[0], waiting)
	if err != nil || res.Status.Code != abiv1.Code_CODE_SUCCESS || len(res.Actions) != 0 {
		t.Fatalf("permit: %+v %v", res, err)
	}
	s2, acts2, err := p.NodeCall(ctx, abiv1.Point_POINT_UNRESERVE, c, nodes[0], waiting)
	if err != nil || len(acts2) != 0 {
		t.Fatalf("unreserve: %+v %v", acts2, err)
	}
	return []any{s, acts, res, s2, acts2}
}

func TestDeclaresWhatItNeeds(t *testing.T) {
	testwasm.Agree(t, pkg, declaresWhatItNeeds)
}

func declaresWhatItNeeds(t *testing.T, wasm []byte) *abiv1.PolicyInfo {
	p := hosttest.Policy(t, "gang", wasm, "")
	info := p.Info()
	if !info.WantsPods || !info.WantsAllNodes {
		t.Fatalf("info %+v: gang needs every node's pods", info)
	}
	for _, pt := range []abiv1.Point{abiv1.Point_POINT_PRE_FILTER, abiv1.Point_POINT_PERMIT, abiv1.Point_POINT_UNRESERVE} {
		if !p.Implements(pt) {
			t.Errorf("does not implement %v", pt)
		}
	}
	if p.Implements(abiv1.Point_POINT_FILTER) || p.Implements(abiv1.Point_POINT_SCORE) {
		t.Errorf("points %b: gang neither filters nor scores", info.Points)
	}
	return info
}
