//go:build !wasip1

package main

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/wasmsched/wasmsched/host/eval"
	"github.com/wasmsched/wasmsched/internal/hosttest"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func TestMain(m *testing.M) { testwasm.Main(m) }

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

// cluster is the pod in testdata/<pod> and the cluster above: the nodes of
// testdata/nodes.yaml and the pods placed on them, testdata/pods.yaml.
func cluster(t *testing.T, pod string) eval.Input {
	return hosttest.Input(t, "testdata/"+pod, "testdata/nodes.yaml", "testdata/pods.yaml")
}

const (
	sharedRefused = `gpu: shared GPUs not allowed: node has nvidia.com/gpu.sharing-strategy=time-slicing, pod lacks annotation gpu.wasmsched.io/allow-shared: "true"`
	trainProducts = "want one of [NVIDIA-A100-SXM4-80GB, NVIDIA-H100-80GB-HBM3]"
)

// TestEvalTrainingPod is the README's example: a 2-GPU pod that wants an
// 80 GB A100 or an H100.
func TestEvalTrainingPod(t *testing.T) {
	rejected := map[string]hosttest.Verdict{
		"dgx-a100-03":  hosttest.Rejected("gpu: insufficient free nvidia.com/gpu: need 2, free 1"),
		"a100-40g-01":  hosttest.Unresolvable("gpu: wrong GPU product: " + trainProducts + ", node has NVIDIA-A100-SXM4-40GB"),
		"t4-shared-01": hosttest.Unresolvable(sharedRefused),
		"cpu-01":       hosttest.Unresolvable("gpu: insufficient free nvidia.com/gpu: need 2, free 0"),
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
		{name: "spread", settings: hosttest.ReadFile(t, "testdata/spread.json"), a1: 0, a2: 100, selected: "dgx-a100-02"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := map[string]hosttest.Verdict{"dgx-a100-01": hosttest.Passes(tt.a1), "dgx-a100-02": hosttest.Passes(tt.a2)}
			for k, v := range rejected {
				want[k] = v
			}
			testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
				rep := hosttest.Evaluate(t, hosttest.Evaluator(t, Name, wasm, tt.settings), cluster(t, "pod.yaml"))
				hosttest.CheckReport(t, rep, tt.selected, want)
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
	wrong := func(product string) hosttest.Verdict {
		return hosttest.Unresolvable("gpu: wrong GPU product: want one of [Tesla-T4, NVIDIA-L4], node has " + product)
	}
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
		rep := hosttest.Evaluate(t, hosttest.Evaluator(t, Name, wasm, ""), cluster(t, "pod-shared.yaml"))
		hosttest.CheckReport(t, rep, "t4-shared-01", map[string]hosttest.Verdict{
			"dgx-a100-01":  wrong("NVIDIA-A100-SXM4-80GB"),
			"dgx-a100-02":  wrong("NVIDIA-A100-SXM4-80GB"),
			"dgx-a100-03":  wrong("NVIDIA-A100-SXM4-80GB"),
			"a100-40g-01":  wrong("NVIDIA-A100-SXM4-40GB"),
			"t4-shared-01": hosttest.PassesAlone(),
			"cpu-01":       hosttest.Unresolvable("gpu: insufficient free nvidia.com/gpu: need 1, free 0"),
		})
		return rep
	})
}

// TestEvalMinMemory: without a product list, the memory minimum alone
// excludes the T4, and binpack fills the fullest A100 first.
func TestEvalMinMemory(t *testing.T) {
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
		rep := hosttest.Evaluate(t, hosttest.Evaluator(t, Name, wasm, ""), cluster(t, "pod-inference.yaml"))
		// Free after placement: 1, 4, 0, 3.
		hosttest.CheckReport(t, rep, "dgx-a100-03", map[string]hosttest.Verdict{
			"dgx-a100-01":  hosttest.Passes(75),
			"dgx-a100-02":  hosttest.Passes(0),
			"dgx-a100-03":  hosttest.Passes(100),
			"a100-40g-01":  hosttest.Passes(25),
			"t4-shared-01": hosttest.Unresolvable("gpu: insufficient GPU memory: need 20000 MiB, node has 15360 MiB"),
			"cpu-01":       hosttest.Unresolvable("gpu: insufficient free nvidia.com/gpu: need 1, free 0"),
		})
		return rep
	})
}

// TestEvalInitContainer: the request is the scheduler's effective one, here
// the init container's 4 GPUs rather than the app container's 1.
func TestEvalInitContainer(t *testing.T) {
	in := cluster(t, "pod-cpu.yaml")
	in.Pod.Spec.InitContainers = []v1.Container{{Name: "warmup", Image: "busybox", Resources: gpuResources(4)}}
	in.Pod.Spec.Containers[0].Resources = gpuResources(1)
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
		rep := hosttest.Evaluate(t, hosttest.Evaluator(t, Name, wasm, ""), in)
		hosttest.CheckReport(t, rep, "a100-40g-01", map[string]hosttest.Verdict{
			"dgx-a100-01":  hosttest.Rejected("gpu: insufficient free nvidia.com/gpu: need 4, free 2"),
			"dgx-a100-02":  hosttest.Passes(0),
			"dgx-a100-03":  hosttest.Rejected("gpu: insufficient free nvidia.com/gpu: need 4, free 1"),
			"a100-40g-01":  hosttest.Passes(100),
			"t4-shared-01": hosttest.Unresolvable(sharedRefused),
			"cpu-01":       hosttest.Unresolvable("gpu: insufficient free nvidia.com/gpu: need 4, free 0"),
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
			in := cluster(t, "pod-cpu.yaml")
			// Annotations of a pod without GPUs are not read.
			in.Pod.Annotations = map[string]string{AnnotationMinMemory: "lots"}
			testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
				rep := hosttest.Evaluate(t, hosttest.Evaluator(t, Name, wasm, tt.settings), in)
				hosttest.CheckReport(t, rep, tt.selected, map[string]hosttest.Verdict{
					"dgx-a100-01": hosttest.Passes(tt.gpu), "dgx-a100-02": hosttest.Passes(tt.gpu), "dgx-a100-03": hosttest.Passes(tt.gpu),
					"a100-40g-01": hosttest.Passes(tt.gpu), "t4-shared-01": hosttest.Passes(tt.gpu), "cpu-01": hosttest.Passes(tt.cpu),
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
		ev := hosttest.Evaluator(t, Name, wasm, "")
		var reps []*eval.Report
		for _, tt := range tests {
			t.Run(tt.key, func(t *testing.T) {
				in := cluster(t, "pod.yaml")
				in.Pod.Annotations[tt.key] = tt.value
				rep := hosttest.Evaluate(t, ev, in)
				want := map[string]hosttest.Verdict{}
				for _, n := range []string{"dgx-a100-01", "dgx-a100-02", "dgx-a100-03", "a100-40g-01", "t4-shared-01", "cpu-01"} {
					want[n] = hosttest.Unresolvable(tt.reason)
				}
				hosttest.CheckReport(t, rep, "", want)
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
	hosttest.RejectsSettings(t, pkg, Name, []hosttest.BadSettings{
		{Settings: `{"strategy": "pack"}`, Want: `"strategy" must be "binpack" or "spread", not "pack"`},
		{Settings: `{"reserveGPUNodes": true, "extra": 1}`, Want: `unknown field "extra"`},
	})
}
