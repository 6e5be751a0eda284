//go:build !wasip1

package main

import (
	"testing"

	"github.com/wasmsched/wasmsched/host/eval"
	"github.com/wasmsched/wasmsched/internal/hosttest"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func TestMain(m *testing.M) { testwasm.Main(m) }

// These tests build the policy as a wasm module and run it through
// host/eval, the code behind `wasmsched eval`, on the nodes in testdata/:
// two edge nodes (groundstation-*), two workers labelled
// kubernetes.io/role: worker and dc-batch-01 without a role label. Every
// scenario runs against the module built by each toolchain (Go and TinyGo),
// and the builds must report the same verdicts, reasons and scores
// (testwasm.Agree).

const pkg = "examples/edge"

// cluster is the pod in testdata/<pod> and the nodes of testdata/nodes.yaml.
func cluster(t *testing.T, pod string) eval.Input {
	return hosttest.Input(t, "testdata/"+pod, "testdata/nodes.yaml", "")
}

const needEdge = "edge: not an edge node: space workloads (annotation type=space) need label kubernetes.io/role=edge, node has "

func TestEvalSpaceWorkload(t *testing.T) {
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
		rep := hosttest.Evaluate(t, hosttest.Evaluator(t, Name, wasm, ""), cluster(t, "pod.yaml"))
		hosttest.CheckReport(t, rep, "groundstation-svalbard", map[string]hosttest.Verdict{
			"groundstation-svalbard":     hosttest.Passes(100),
			"groundstation-punta-arenas": hosttest.Passes(100),
			"dc-worker-01":               hosttest.Unresolvable(needEdge + "kubernetes.io/role=worker"),
			"dc-worker-02":               hosttest.Unresolvable(needEdge + "kubernetes.io/role=worker"),
			"dc-batch-01":                hosttest.Unresolvable(needEdge + "no kubernetes.io/role label"),
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
			in := cluster(t, "pod-web.yaml")
			in.Pod.Annotations = tt.annotations
			testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
				rep := hosttest.Evaluate(t, hosttest.Evaluator(t, Name, wasm, ""), in)
				hosttest.CheckReport(t, rep, "dc-worker-01", map[string]hosttest.Verdict{
					"groundstation-svalbard":     hosttest.Passes(0),
					"groundstation-punta-arenas": hosttest.Passes(0),
					"dc-worker-01":               hosttest.Passes(100),
					"dc-worker-02":               hosttest.Passes(100),
					"dc-batch-01":                hosttest.Passes(100),
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
		ev := hosttest.Evaluator(t, Name, wasm, `{"annotation": "example.com/tier=realtime", "edgeLabel": "topology.kubernetes.io/zone=svalbard"}`)
		in := cluster(t, "pod.yaml")
		in.Pod.Annotations = map[string]string{"example.com/tier": "realtime"}
		realtime := hosttest.Evaluate(t, ev, in)
		hosttest.CheckReport(t, realtime, "groundstation-svalbard", map[string]hosttest.Verdict{
			"groundstation-svalbard":     hosttest.PassesAlone(),
			"groundstation-punta-arenas": hosttest.Unresolvable(need + "punta-arenas"),
			"dc-worker-01":               hosttest.Unresolvable(need + "eu-central-1a"),
			"dc-worker-02":               hosttest.Unresolvable(need + "eu-central-1b"),
			"dc-batch-01":                hosttest.Unresolvable(need + "eu-central-1a"),
		})

		// type: space means nothing under these settings: the pod may run
		// anywhere and keeps off the one "edge" node.
		space := hosttest.Evaluate(t, ev, cluster(t, "pod.yaml"))
		hosttest.CheckReport(t, space, "groundstation-punta-arenas", map[string]hosttest.Verdict{
			"groundstation-svalbard":     hosttest.Passes(0),
			"groundstation-punta-arenas": hosttest.Passes(100),
			"dc-worker-01":               hosttest.Passes(100),
			"dc-worker-02":               hosttest.Passes(100),
			"dc-batch-01":                hosttest.Passes(100),
		})
		return []*eval.Report{realtime, space}
	})
}

func TestEvalSettingsRejected(t *testing.T) {
	hosttest.RejectsSettings(t, pkg, Name, []hosttest.BadSettings{
		{Settings: `{"edgeLabel": "edge"}`, Want: `"edgeLabel" must be key=value with a non-empty key, not "edge"`},
		{Settings: `{"nodeLabel": "kubernetes.io/role=edge"}`, Want: `unknown field "nodeLabel"`},
	})
}
