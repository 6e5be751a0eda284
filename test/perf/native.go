package perf

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// NativeName is the native twin's name in scheduler configurations.
const NativeName = "GPUNative"

// The resource, labels and annotations of examples/gpu (request.go).
const (
	resourceGPU           = "nvidia.com/gpu"
	labelProduct          = "nvidia.com/gpu.product"
	labelMemory           = "nvidia.com/gpu.memory"
	labelSharing          = "nvidia.com/gpu.sharing-strategy"
	sharedSuffix          = "-SHARED"
	notShared             = "none"
	annotationProduct     = "gpu.wasmsched.io/product"
	annotationMinMemory   = "gpu.wasmsched.io/min-memory-mib"
	annotationAllowShared = "gpu.wasmsched.io/allow-shared"
	policyName            = "gpu"
)

// Native is the gpu example policy (examples/gpu) written as an ordinary
// compiled-in scheduler plugin, with the example's default settings
// (binpack, reserveGPUNodes). It is the baseline the benchmark compares
// WasmPolicy with: the same rules, the same verdicts and reasons, the same
// scores, without WebAssembly. It is a benchmark fixture, not shipped;
// TestNativeTwin checks it against the wasm module.
//
// Its methods are safe for concurrent use, as the framework requires.
type Native struct{}

var (
	_ fwk.PreFilterPlugin = &Native{}
	_ fwk.FilterPlugin    = &Native{}
	_ fwk.ScorePlugin     = &Native{}
	_ fwk.ScoreExtensions = &Native{}
)

// NewNative is the plugin factory; it takes no arguments.
func NewNative(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return &Native{}, nil
}

// Name implements fwk.Plugin.
func (*Native) Name() string { return NativeName }

const nativeKey fwk.StateKey = NativeName

// nativeRequest is the pod's parsed GPU request for one cycle. Filter runs
// on many goroutines at once: the fields set by PreFilter are read only, and
// the rejection memo is locked.
type nativeRequest struct {
	gpus         int64
	products     []string
	minMemoryMiB int64
	allowShared  bool
	invalid      *fwk.Status

	mu   sync.Mutex
	memo map[string]*fwk.Status
}

// Clone implements fwk.StateData; the request is shared by clones.
func (r *nativeRequest) Clone() fwk.StateData { return r }

func parseNative(pod *v1.Pod) *nativeRequest {
	pi := framework.PodInfo{Pod: pod}
	r := &nativeRequest{gpus: pi.CalculateResource().Resource.GetScalarResources()[resourceGPU]}
	if r.gpus <= 0 {
		r.gpus = 0
		return r
	}
	r.memo = map[string]*fwk.Status{}
	if v, ok := pod.Annotations[annotationProduct]; ok {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				r.products = append(r.products, s)
			}
		}
		if len(r.products) == 0 {
			r.invalid = badAnnotation(annotationProduct, v, "lists no product")
			return r
		}
	}
	if v, ok := pod.Annotations[annotationMinMemory]; ok {
		n, good := parseMiB(v)
		if !good || n <= 0 {
			r.invalid = badAnnotation(annotationMinMemory, v, "is not a positive whole number of MiB")
			return r
		}
		r.minMemoryMiB = n
	}
	if v, ok := pod.Annotations[annotationAllowShared]; ok {
		switch v {
		case "true":
			r.allowShared = true
		case "false":
		default:
			r.invalid = badAnnotation(annotationAllowShared, v, `is not "true" or "false"`)
			return r
		}
	}
	return r
}

func badAnnotation(key, value, problem string) *fwk.Status {
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: bad annotation %s: %q %s", policyName, key, value, problem))
}

// reject returns the memoised rejection for key, building it on first use.
func (r *nativeRequest) reject(key string, build func() *fwk.Status) *fwk.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.memo[key]
	if !ok {
		s = build()
		r.memo[key] = s
	}
	return s
}

func state(cs fwk.CycleState) *nativeRequest {
	d, err := cs.Read(nativeKey)
	if err != nil {
		return nil
	}
	return d.(*nativeRequest)
}

// PreFilter parses the pod once per cycle; a pod without GPUs skips Filter.
func (*Native) PreFilter(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	r := parseNative(pod)
	cs.Write(nativeKey, r)
	switch {
	case r.invalid != nil:
		return nil, r.invalid
	case r.gpus == 0:
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin.
func (*Native) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

func gpus(res fwk.Resource) int64 { return res.GetScalarResources()[resourceGPU] }

// Filter applies the gpu example's rules in its order.
func (*Native) Filter(_ context.Context, cs fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	r := state(cs)
	if r == nil {
		r = parseNative(pod)
	}
	if r.invalid != nil {
		return r.invalid
	}
	if r.gpus == 0 {
		return nil
	}
	alloc := gpus(ni.GetAllocatable())
	free := alloc - gpus(ni.GetRequested())
	if alloc < r.gpus {
		return r.reject("small/"+strconv.FormatInt(free, 10), func() *fwk.Status {
			return insufficient(fwk.UnschedulableAndUnresolvable, r.gpus, free)
		})
	}
	labels := ni.Node().Labels
	if strategy, ok := labels[labelSharing]; ok && strategy != notShared && !r.allowShared {
		return r.reject("shared/"+strategy, func() *fwk.Status {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: shared GPUs not allowed: node has %s=%s, pod lacks annotation %s: \"true\"",
				policyName, labelSharing, strategy, annotationAllowShared))
		})
	}
	if len(r.products) > 0 {
		product, ok := labels[labelProduct]
		switch {
		case !ok:
			return r.reject("noproduct", func() *fwk.Status {
				return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: wrong GPU product: want %s, node has no %s label", policyName, r.wanted(), labelProduct))
			})
		case !r.productOK(product):
			return r.reject("product/"+product, func() *fwk.Status {
				return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: wrong GPU product: want %s, node has %s", policyName, r.wanted(), product))
			})
		}
	}
	if r.minMemoryMiB > 0 {
		label, ok := labels[labelMemory]
		if !ok {
			return r.reject("nomemory", func() *fwk.Status {
				return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: insufficient GPU memory: need %d MiB, node has no %s label", policyName, r.minMemoryMiB, labelMemory))
			})
		}
		mib, good := parseMiB(label)
		switch {
		case !good:
			return r.reject("badmemory/"+label, func() *fwk.Status {
				return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: unreadable GPU memory: node label %s is %q, not a whole number of MiB", policyName, labelMemory, label))
			})
		case mib < r.minMemoryMiB:
			return r.reject("memory/"+label, func() *fwk.Status {
				return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: insufficient GPU memory: need %d MiB, node has %d MiB", policyName, r.minMemoryMiB, mib))
			})
		}
	}
	if free < r.gpus {
		return r.reject("short/"+strconv.FormatInt(free, 10), func() *fwk.Status {
			return insufficient(fwk.Unschedulable, r.gpus, free)
		})
	}
	return nil
}

func insufficient(code fwk.Code, need, free int64) *fwk.Status {
	return fwk.NewStatus(code, fmt.Sprintf("%s: insufficient free %s: need %d, free %d", policyName, resourceGPU, need, max(free, 0)))
}

func (r *nativeRequest) wanted() string {
	if len(r.products) == 1 {
		return r.products[0]
	}
	return "one of [" + strings.Join(r.products, ", ") + "]"
}

func (r *nativeRequest) productOK(product string) bool {
	base, _ := strings.CutSuffix(product, sharedSuffix)
	for _, want := range r.products {
		if product == want || base == want {
			return true
		}
	}
	return false
}

func parseMiB(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var v int64
	for i := 0; i < len(s); i++ {
		d := int64(s[i]) - '0'
		if d < 0 || d > 9 || v > (math.MaxInt64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// Score is the GPUs left free for a GPU pod (normalised later); for other
// pods 0 on nodes with GPUs and 100 on nodes without (reserveGPUNodes).
func (*Native) Score(_ context.Context, cs fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	r := state(cs)
	if r == nil {
		r = parseNative(pod)
	}
	if r.invalid != nil {
		return 0, r.invalid
	}
	alloc := gpus(ni.GetAllocatable())
	if r.gpus == 0 {
		if alloc <= 0 {
			return 100, nil
		}
		return 0, nil
	}
	return alloc - gpus(ni.GetRequested()) - r.gpus, nil
}

// ScoreExtensions implements fwk.ScorePlugin.
func (n *Native) ScoreExtensions() fwk.ScoreExtensions { return n }

// NormalizeScore maps a GPU pod's scores onto 0..100, binpack: the node
// left with the fewest free GPUs gets 100.
func (*Native) NormalizeScore(_ context.Context, cs fwk.CycleState, pod *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	r := state(cs)
	if r == nil {
		r = parseNative(pod)
	}
	if r.invalid != nil {
		return r.invalid
	}
	if r.gpus == 0 || len(scores) == 0 {
		return nil
	}
	lo, hi := scores[0].Score, scores[0].Score
	for _, s := range scores[1:] {
		lo, hi = min(lo, s.Score), max(hi, s.Score)
	}
	for i := range scores {
		if hi == lo {
			scores[i].Score = 100
		} else {
			scores[i].Score = (hi - scores[i].Score) * 100 / (hi - lo)
		}
	}
	return nil
}
