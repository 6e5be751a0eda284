package main

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmsched/wasmsched/host/eval"
	"github.com/wasmsched/wasmsched/internal/evalcheck"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// These tests build the policy as a wasm module and run it through
// host/eval, the code behind `wasmsched eval`, on the nodes in testdata/:
// two edge nodes (groundstation-*), two workers labelled
// kubernetes.io/role: worker and dc-batch-01 without a role label. Every
// scenario runs against the module built by each toolchain (Go and TinyGo),
// and the builds must report the same verdicts, reasons and scores
// (testwasm.Agree).

const pkg = "examples/edge"

func evaluator(t *testing.T, wasm []byte, settings string) *eval.Evaluator {
	t.Helper()
	ctx := context.Background()
	ev, err := eval.Load(ctx, []eval.PolicySpec{{Name: Name, Wasm: wasm, Settings: []byte(settings)}})
	if err != nil {
		t.Fatalf("load with settings %q: %v", settings, err)
	}
	t.Cleanup(func() { ev.Close(ctx) })
	return ev
}

func readPod(t *testing.T, file string) *v1.Pod {
	t.Helper()
	p, err := eval.ReadPod("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t *testing.T, ev *eval.Evaluator, pod *v1.Pod) *eval.Report {
	t.Helper()
	nodes, err := eval.ReadNodes("testdata/nodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ev.Evaluate(context.Background(), eval.Input{Pod: pod, Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// verdict is the expected outcome on one node: a score for a node that
// passes, a reason for one that is rejected (always unresolvable).
type verdict struct {
	score  int64 // unscored: the only node that fits, which the scheduler does not score
	reason string
}

const unscored = -1

func check(t *testing.T, rep *eval.Report, selected string, want map[string]verdict) {
	t.Helper()
	if len(rep.Nodes) != len(want) {
		t.Fatalf("report has %d nodes, want %d", len(rep.Nodes), len(want))
	}
	for _, n := range rep.Nodes {
		w, ok := want[n.Name]
		switch {
		case !ok:
			t.Errorf("unexpected node %s", n.Name)
		case w.reason != "":
			if n.Code != "UnschedulableAndUnresolvable" || !slices.Equal(n.Reasons, []string{w.reason}) {
				t.Errorf("node %s: %s %q, want UnschedulableAndUnresolvable %q", n.Name, n.Code, n.Reasons, w.reason)
			}
		case n.Code != "Success":
			t.Errorf("node %s: %s %q, want Success", n.Name, n.Code, n.Reasons)
		case (n.Score == nil) != (w.score == unscored):
			t.Errorf("node %s: score %v, want %d (-1: none)", n.Name, n.Score, w.score)
		case n.Score != nil && *n.Score != w.score:
			t.Errorf("node %s: score %d, want %d", n.Name, *n.Score, w.score)
		}
	}
	if rep.Selected != selected {
		t.Errorf("selected %q, want %q", rep.Selected, selected)
	}
}

const needEdge = "edge: not an edge node: space workloads (annotation type=space) need label kubernetes.io/role=edge, node has "

func TestEvalSpaceWorkload(t *testing.T) {
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
		rep := run(t, evaluator(t, wasm, ""), readPod(t, "pod.yaml"))
		check(t, rep, "groundstation-svalbard", map[string]verdict{
			"groundstation-svalbard":     {score: 100},
			"groundstation-punta-arenas": {score: 100},
			"dc-worker-01":               {reason: needEdge + "kubernetes.io/role=worker"},
			"dc-worker-02":               {reason: needEdge + "kubernetes.io/role=worker"},
			"dc-batch-01":                {reason: needEdge + "no kubernetes.io/role label"},
		})
		return rep
	})
}

func TestEvalOtherWorkload(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
	}{
		{"no annotation", nil},
		{"another type", map[string]string{"type": "ground"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := readPod(t, "pod-web.yaml")
			pod.Annotations = tt.annotations
			testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
				rep := run(t, evaluator(t, wasm, ""), pod)
				check(t, rep, "dc-worker-01", map[string]verdict{
					"groundstation-svalbard":     {score: 0},
					"groundstation-punta-arenas": {score: 0},
					"dc-worker-01":               {score: 100},
					"dc-worker-02":               {score: 100},
					"dc-batch-01":                {score: 100},
				})
				return rep
			})
		})
	}
}

// TestEvalCustomSettings: with another annotation and label, the defaults
// no longer apply.
func TestEvalCustomSettings(t *testing.T) {
	const need = "edge: not an edge node: space workloads (annotation example.com/tier=realtime) need label topology.kubernetes.io/zone=svalbard, node has topology.kubernetes.io/zone="
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) []*eval.Report {
		ev := evaluator(t, wasm, `{"annotation": "example.com/tier=realtime", "edgeLabel": "topology.kubernetes.io/zone=svalbard"}`)
		pod := readPod(t, "pod.yaml")
		pod.Annotations = map[string]string{"example.com/tier": "realtime"}
		realtime := run(t, ev, pod)
		check(t, realtime, "groundstation-svalbard", map[string]verdict{
			"groundstation-svalbard":     {score: unscored},
			"groundstation-punta-arenas": {reason: need + "punta-arenas"},
			"dc-worker-01":               {reason: need + "eu-central-1a"},
			"dc-worker-02":               {reason: need + "eu-central-1b"},
			"dc-batch-01":                {reason: need + "eu-central-1a"},
		})

		// type: space means nothing under these settings: the pod may run
		// anywhere and keeps off the one "edge" node.
		space := run(t, ev, readPod(t, "pod.yaml"))
		check(t, space, "groundstation-punta-arenas", map[string]verdict{
			"groundstation-svalbard":     {score: 0},
			"groundstation-punta-arenas": {score: 100},
			"dc-worker-01":               {score: 100},
			"dc-worker-02":               {score: 100},
			"dc-batch-01":                {score: 100},
		})
		return []*eval.Report{realtime, space}
	})
}

func TestEvalSettingsRejected(t *testing.T) {
	evalcheck.RejectsSettings(t, pkg, Name, []evalcheck.BadSettings{
		{Settings: `{"edgeLabel": "edge"}`, Want: `"edgeLabel" must be key=value with a non-empty key, not "edge"`},
		{Settings: `{"nodeLabel": "kubernetes.io/role=edge"}`, Want: `unknown field "nodeLabel"`},
	})
}
