package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/wasmsched/wasmsched/host/eval"
	"github.com/wasmsched/wasmsched/internal/evalcheck"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// These tests build the policy as a wasm module and run it through
// host/eval, the code behind `wasmsched eval`, on the cluster in testdata/:
//
//	node          GPUs  product                 memory  sharing       free
//	dgx-a100-01   8     NVIDIA-A100-SXM4-80GB   81920   none          2
//	dgx-a100-02   8     NVIDIA-A100-SXM4-80GB   81920   none          5
//	dgx-a100-03   8     NVIDIA-A100-SXM4-80GB   81920   none          1
//	a100-40g-01   4     NVIDIA-A100-SXM4-40GB   40960   none          4
//	t4-shared-01  4     Tesla-T4-SHARED         15360   time-slicing  3
//	cpu-01        0     -                       -       -             0

// Every scenario runs against the module built by each toolchain (Go and
// TinyGo), and the builds must report the same verdicts, reasons and
// scores (testwasm.Agree).
const pkg = "examples/gpu"

// evaluator loads the module wasm with settings.
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

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readPod(t *testing.T, file string) *v1.Pod {
	t.Helper()
	p, err := eval.ReadPod(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// run evaluates pod against the testdata cluster.
func run(t *testing.T, ev *eval.Evaluator, pod *v1.Pod) *eval.Report {
	t.Helper()
	nodes, err := eval.ReadNodes("testdata/nodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	placed, err := eval.ReadPods("testdata/pods.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ev.Evaluate(context.Background(), eval.Input{Pod: pod, Nodes: nodes, Pods: placed})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// verdict is the expected outcome on one node: a code and a reason, or a
// score for a node that passes.
type verdict struct {
	code   string
	score  int64
	reason string
}

func pass(score int64) verdict { return verdict{code: "Success", score: score} }

// unscored is the score of the only node that fits: the scheduler does not
// score it.
const unscored = -1

func reject(reason string) verdict { return verdict{code: "Unschedulable", reason: reason} }

func unresolvable(reason string) verdict {
	return verdict{code: "UnschedulableAndUnresolvable", reason: reason}
}

func check(t *testing.T, rep *eval.Report, selected string, want map[string]verdict) {
	t.Helper()
	if len(rep.Nodes) != len(want) {
		t.Fatalf("report has %d nodes, want %d", len(rep.Nodes), len(want))
	}
	for _, n := range rep.Nodes {
		w, ok := want[n.Name]
		if !ok {
			t.Errorf("unexpected node %s", n.Name)
			continue
		}
		var reasons []string
		if w.reason != "" {
			reasons = []string{w.reason}
		}
		if n.Code != w.code || !slices.Equal(n.Reasons, reasons) {
			t.Errorf("node %s: %s %q, want %s %q", n.Name, n.Code, n.Reasons, w.code, reasons)
		}
		switch {
		case w.code == "Success" && (n.Score == nil) != (w.score == unscored):
			t.Errorf("node %s: score %v, want %d (-1: none)", n.Name, n.Score, w.score)
		case w.code == "Success" && n.Score != nil && *n.Score != w.score:
			t.Errorf("node %s: score %d, want %d", n.Name, *n.Score, w.score)
		}
	}
	if rep.Selected != selected {
		t.Errorf("selected %q, want %q", rep.Selected, selected)
	}
}

const (
	sharedRefused = `gpu: shared GPUs not allowed: node has nvidia.com/gpu.sharing-strategy=time-slicing, pod lacks annotation gpu.wasmsched.io/allow-shared: "true"`
	trainProducts = "want one of [NVIDIA-A100-SXM4-80GB, NVIDIA-H100-80GB-HBM3]"
)

// TestEvalTrainingPod is the README's example: a 2-GPU pod that wants an
// 80 GB A100 or an H100.
func TestEvalTrainingPod(t *testing.T) {
	rejected := map[string]verdict{
		"dgx-a100-03":  reject("gpu: insufficient free nvidia.com/gpu: need 2, free 1"),
		"a100-40g-01":  unresolvable("gpu: wrong GPU product: " + trainProducts + ", node has NVIDIA-A100-SXM4-40GB"),
		"t4-shared-01": unresolvable(sharedRefused),
		"cpu-01":       unresolvable("gpu: insufficient free nvidia.com/gpu: need 2, free 0"),
	}
	tests := []struct {
		name     string
		settings string
		a1, a2   int64
		selected string
	}{
		// binpack: dgx-a100-01 is left with 0 free GPUs, dgx-a100-02 with 3.
		{name: "default", settings: "", a1: 100, a2: 0, selected: "dgx-a100-01"},
		{name: "binpack", settings: `{"strategy": "binpack"}`, a1: 100, a2: 0, selected: "dgx-a100-01"},
		{name: "spread", settings: readFile(t, "testdata/spread.json"), a1: 0, a2: 100, selected: "dgx-a100-02"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := map[string]verdict{"dgx-a100-01": pass(tt.a1), "dgx-a100-02": pass(tt.a2)}
			for k, v := range rejected {
				want[k] = v
			}
			testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
				rep := run(t, evaluator(t, wasm, tt.settings), readPod(t, "pod.yaml"))
				check(t, rep, tt.selected, want)
				if rep.Permit.Code != "Success" {
					t.Errorf("permit %s %q, want Success", rep.Permit.Code, rep.Permit.Reasons)
				}
				return rep
			})
		})
	}
}

// TestEvalSharedNotebook: a pod that allows shared GPUs and wants a T4
// lands on the time-sliced node, whose product carries GFD's -SHARED suffix.
func TestEvalSharedNotebook(t *testing.T) {
	wrong := func(product string) verdict {
		return unresolvable("gpu: wrong GPU product: want one of [Tesla-T4, NVIDIA-L4], node has " + product)
	}
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
		rep := run(t, evaluator(t, wasm, ""), readPod(t, "pod-shared.yaml"))
		check(t, rep, "t4-shared-01", map[string]verdict{
			"dgx-a100-01":  wrong("NVIDIA-A100-SXM4-80GB"),
			"dgx-a100-02":  wrong("NVIDIA-A100-SXM4-80GB"),
			"dgx-a100-03":  wrong("NVIDIA-A100-SXM4-80GB"),
			"a100-40g-01":  wrong("NVIDIA-A100-SXM4-40GB"),
			"t4-shared-01": pass(unscored),
			"cpu-01":       unresolvable("gpu: insufficient free nvidia.com/gpu: need 1, free 0"),
		})
		return rep
	})
}

// TestEvalMinMemory: without a product list, the memory minimum alone
// excludes the T4, and binpack fills the fullest A100 first.
func TestEvalMinMemory(t *testing.T) {
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
		rep := run(t, evaluator(t, wasm, ""), readPod(t, "pod-inference.yaml"))
		// Free after placement: 1, 4, 0, 3.
		check(t, rep, "dgx-a100-03", map[string]verdict{
			"dgx-a100-01":  pass(75),
			"dgx-a100-02":  pass(0),
			"dgx-a100-03":  pass(100),
			"a100-40g-01":  pass(25),
			"t4-shared-01": unresolvable("gpu: insufficient GPU memory: need 20000 MiB, node has 15360 MiB"),
			"cpu-01":       unresolvable("gpu: insufficient free nvidia.com/gpu: need 1, free 0"),
		})
		return rep
	})
}

// TestEvalInitContainer: the request is the scheduler's effective one, here
// the init container's 4 GPUs rather than the app container's 1.
func TestEvalInitContainer(t *testing.T) {
	pod := readPod(t, "pod-cpu.yaml")
	pod.Spec.InitContainers = []v1.Container{{Name: "warmup", Image: "busybox", Resources: gpuResources(4)}}
	pod.Spec.Containers[0].Resources = gpuResources(1)
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
		rep := run(t, evaluator(t, wasm, ""), pod)
		check(t, rep, "a100-40g-01", map[string]verdict{
			"dgx-a100-01":  reject("gpu: insufficient free nvidia.com/gpu: need 4, free 2"),
			"dgx-a100-02":  pass(0),
			"dgx-a100-03":  reject("gpu: insufficient free nvidia.com/gpu: need 4, free 1"),
			"a100-40g-01":  pass(100),
			"t4-shared-01": unresolvable(sharedRefused),
			"cpu-01":       unresolvable("gpu: insufficient free nvidia.com/gpu: need 4, free 0"),
		})
		return rep
	})
}

func gpuResources(n int64) v1.ResourceRequirements {
	l := v1.ResourceList{ResourceGPU: *resource.NewQuantity(n, resource.DecimalSI)}
	return v1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
}

// TestEvalNoGPUPod: a pod without GPUs passes everywhere and, with
// reserveGPUNodes, prefers the node without GPUs.
func TestEvalNoGPUPod(t *testing.T) {
	tests := []struct {
		name     string
		settings string
		gpu, cpu int64
		selected string
	}{
		{name: "default", settings: "", gpu: 0, cpu: 100, selected: "cpu-01"},
		{name: "reserve", settings: `{"reserveGPUNodes": true}`, gpu: 0, cpu: 100, selected: "cpu-01"},
		// All equal: the evaluator picks the first node.
		{name: "no reserve", settings: `{"reserveGPUNodes": false}`, gpu: 0, cpu: 0, selected: "dgx-a100-01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := readPod(t, "pod-cpu.yaml")
			// Annotations of a pod without GPUs are not read.
			pod.Annotations = map[string]string{AnnotationMinMemory: "lots"}
			testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
				rep := run(t, evaluator(t, wasm, tt.settings), pod)
				check(t, rep, tt.selected, map[string]verdict{
					"dgx-a100-01": pass(tt.gpu), "dgx-a100-02": pass(tt.gpu), "dgx-a100-03": pass(tt.gpu),
					"a100-40g-01": pass(tt.gpu), "t4-shared-01": pass(tt.gpu), "cpu-01": pass(tt.cpu),
				})
				return rep
			})
		})
	}
}

// TestEvalMalformedAnnotation: PreFilter rejects the pod on every node.
func TestEvalMalformedAnnotation(t *testing.T) {
	tests := []struct {
		key, value, reason string
	}{
		{AnnotationMinMemory, "40Gi", `gpu: bad annotation gpu.wasmsched.io/min-memory-mib: "40Gi" is not a positive whole number of MiB`},
		{AnnotationProduct, ",", `gpu: bad annotation gpu.wasmsched.io/product: "," lists no product`},
		{AnnotationAllowShared, "yes", `gpu: bad annotation gpu.wasmsched.io/allow-shared: "yes" is not "true" or "false"`},
	}
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) []*eval.Report {
		ev := evaluator(t, wasm, "")
		var reps []*eval.Report
		for _, tt := range tests {
			t.Run(tt.key, func(t *testing.T) {
				pod := readPod(t, "pod.yaml")
				pod.Annotations[tt.key] = tt.value
				rep := run(t, ev, pod)
				want := map[string]verdict{}
				for _, n := range []string{"dgx-a100-01", "dgx-a100-02", "dgx-a100-03", "a100-40g-01", "t4-shared-01", "cpu-01"} {
					want[n] = unresolvable(tt.reason)
				}
				check(t, rep, "", want)
				if rep.Permit.Code != "Skip" {
					t.Errorf("permit %s, want Skip", rep.Permit.Code)
				}
				reps = append(reps, rep)
			})
		}
		return reps
	})
}

// TestEvalSettingsRejected: bad settings fail the load, naming the problem.
func TestEvalSettingsRejected(t *testing.T) {
	evalcheck.RejectsSettings(t, pkg, Name, []evalcheck.BadSettings{
		{Settings: `{"strategy": "pack"}`, Want: `"strategy" must be "binpack" or "spread", not "pack"`},
		{Settings: `{"reserveGPUNodes": true, "extra": 1}`, Want: `unknown field "extra"`},
	})
}
