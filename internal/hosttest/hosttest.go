// Package hosttest runs a policy module through the host's own code in
// tests: host/eval, as `wasmsched eval` does, and host/policy, as the
// WasmPolicy plugin does. It loads a module and closes it when the test
// ends (Evaluator, Policy), reads the YAML input eval reads (Input),
// checks a report node by node (CheckReport) and checks that bad settings
// are refused the same way by every toolchain's build (RejectsSettings).
//
// The Kubernetes objects of these tests come from the scheduler's own test
// wrappers, k8s.io/kubernetes/pkg/scheduler/testing (st.MakePod,
// st.MakeNode); NodeInfo puts a node and its pods together as the
// scheduler's snapshot does. The guest-side twin of this package, for a
// policy's native tests, is guest/guesttest.
//
// It is not part of internal/testwasm because host/policy's own tests
// import testwasm, and host/eval imports host/policy. It is imported by
// tests only.
package hosttest

import (
	"context"
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/wasmsched/wasmsched/host/eval"
	"github.com/wasmsched/wasmsched/host/policy"
)

// Evaluator loads the module wasm as the policy name with settings, as
// `wasmsched eval --policy --config` does, and closes it when t ends. A
// failed load fails t.
func Evaluator(t testing.TB, name string, wasm []byte, settings string) *eval.Evaluator {
	t.Helper()
	ctx := context.Background()
	ev, err := eval.Load(ctx, []eval.PolicySpec{{Name: name, Wasm: wasm, Settings: []byte(settings)}})
	if err != nil {
		t.Fatalf("load %s with settings %q: %v", name, settings, err)
	}
	t.Cleanup(func() { ev.Close(ctx) })
	return ev
}

// Policy loads the module wasm as the policy name with settings, as the
// WasmPolicy plugin does, with one instance (so that calls see one
// instance's state), and closes it when t ends. A failed load fails t.
func Policy(t testing.TB, name string, wasm []byte, settings string) *policy.Policy {
	t.Helper()
	ctx := context.Background()
	p, err := policy.Load(ctx, policy.Options{Name: name, Wasm: wasm, Settings: []byte(settings), MaxInstances: 1})
	if err != nil {
		t.Fatalf("load %s with settings %q: %v", name, settings, err)
	}
	t.Cleanup(func() { _ = p.Close(ctx) })
	return p
}

// Input reads what `wasmsched eval --pod --nodes --pods` reads: the pod to
// schedule, the nodes and the pods already placed on them (pods "" for
// none). Unreadable input fails t.
func Input(t testing.TB, pod, nodes, pods string) eval.Input {
	t.Helper()
	var (
		in  eval.Input
		err error
	)
	if in.Pod, err = eval.ReadPod(pod); err != nil {
		t.Fatal(err)
	}
	if in.Nodes, err = eval.ReadNodes(nodes); err != nil {
		t.Fatal(err)
	}
	if pods != "" {
		if in.Pods, err = eval.ReadPods(pods); err != nil {
			t.Fatal(err)
		}
	}
	return in
}

// Evaluate runs ev on in; an error (bad input: a policy's failure is part
// of the report) fails t.
func Evaluate(t testing.TB, ev *eval.Evaluator, in eval.Input) *eval.Report {
	t.Helper()
	rep, err := ev.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// ReadFile returns the content of a file, settings for instance; an
// unreadable file fails t.
func ReadFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// NodeInfo is node with pods on it, as the scheduler's snapshot holds it
// and passes it to a plugin.
func NodeInfo(node *v1.Node, pods ...*v1.Pod) *framework.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(node)
	return ni
}
