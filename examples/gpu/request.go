package main

import (
	"math"
	"strings"

	"github.com/wasmsched/wasmsched/guest"
)

// The resource and the node labels the policy reads. The labels are those
// NVIDIA GPU Feature Discovery (GFD) writes.
const (
	ResourceGPU  = "nvidia.com/gpu"
	LabelProduct = "nvidia.com/gpu.product"
	// LabelMemory is the memory of one GPU, in MiB.
	LabelMemory  = "nvidia.com/gpu.memory"
	LabelSharing = "nvidia.com/gpu.sharing-strategy"

	// sharedSuffix is what GFD appends to the product label of time-sliced
	// GPUs when the device plugin keeps the resource name nvidia.com/gpu
	// (renameByDefault false): Tesla-T4 becomes Tesla-T4-SHARED.
	sharedSuffix = "-SHARED"
	// notShared is the sharing-strategy label value of unshared GPUs.
	notShared = "none"
)

// The pod annotations the policy reads. They matter only for pods that
// request nvidia.com/gpu; other pods' annotations are not read.
const (
	// AnnotationProduct lists the acceptable GPU products, comma-separated:
	// "NVIDIA-A100-SXM4-80GB, NVIDIA-H100-80GB-HBM3".
	AnnotationProduct = "gpu.wasmsched.io/product"
	// AnnotationMinMemory is the least memory per GPU, in MiB: "40960".
	AnnotationMinMemory = "gpu.wasmsched.io/min-memory-mib"
	// AnnotationAllowShared, "true", admits nodes whose GPUs are shared
	// (time-slicing, MPS). "false" is the same as leaving it out.
	AnnotationAllowShared = "gpu.wasmsched.io/allow-shared"
)

// request is what the policy knows of the pod in one cycle: its GPU
// request and its parsed annotations. PreFilter builds it once per cycle and
// keeps it in Cycle.State, so that Filter and Score, which run once per
// node, read it without parsing or allocating.
//
// A request belongs to one instance's cycle; like every policy function it
// is only ever used from one goroutine.
type request struct {
	// gpus is the pod's effective nvidia.com/gpu request; 0 for pods that
	// need no GPU, whose annotations are then not read.
	gpus int64
	// products are the acceptable values of LabelProduct; empty for any.
	products []string
	// minMemoryMiB is the least LabelMemory; 0 for any.
	minMemoryMiB int64
	allowShared  bool

	// invalid is the verdict on a pod with a malformed annotation; its Code
	// is zero for a well-formed pod.
	invalid guest.Status

	// Rejections built so far in this cycle, keyed by the node value that
	// produced them: a rule that rejects many alike nodes formats its reason
	// once, and the host, seeing the same reason again, does not fetch it
	// again either.
	tooSmall, short     memo[int64]
	product, memory     memo[string]
	badMemory, shared   memo[string]
	noProduct, noMemory guest.Status
}

// memo remembers the last rejection one rule built and the node value it
// was built for.
type memo[K comparable] struct {
	set    bool
	key    K
	status guest.Status
}

func (m *memo[K]) lookup(key K) (guest.Status, bool) {
	return m.status, m.set && m.key == key
}

func (m *memo[K]) store(key K, s guest.Status) guest.Status {
	m.set, m.key, m.status = true, key, s
	return s
}

// parseRequest reads the pod's GPU request and, when it requests GPUs, its
// annotations. A malformed annotation sets invalid.
func parseRequest(p *guest.Pod) *request {
	r := &request{gpus: p.Request(ResourceGPU)}
	if r.gpus <= 0 {
		r.gpus = 0
		return r
	}
	if v, ok := p.Annotation(AnnotationProduct); ok {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				r.products = append(r.products, s)
			}
		}
		if len(r.products) == 0 {
			r.invalid = badAnnotation(AnnotationProduct, v, "lists no product")
			return r
		}
	}
	if v, ok := p.Annotation(AnnotationMinMemory); ok {
		n, good := parseMiB(v)
		if !good || n <= 0 {
			r.invalid = badAnnotation(AnnotationMinMemory, v, "is not a positive whole number of MiB")
			return r
		}
		r.minMemoryMiB = n
	}
	if v, ok := p.Annotation(AnnotationAllowShared); ok {
		switch v {
		case "true":
			r.allowShared = true
		case "false":
		default:
			r.invalid = badAnnotation(AnnotationAllowShared, v, `is not "true" or "false"`)
			return r
		}
	}
	return r
}

// badAnnotation is the verdict on a malformed annotation: no node can
// change it, so it is unresolvable.
func badAnnotation(key, value, problem string) guest.Status {
	return guest.RejectUnresolvable("%s: bad annotation %s: %q %s", Name, key, value, problem)
}

// wanted describes the acceptable products for a reason.
func (r *request) wanted() string {
	if len(r.products) == 1 {
		return r.products[0]
	}
	return "one of [" + strings.Join(r.products, ", ") + "]"
}

// productOK reports whether a node's product label is acceptable. A
// product with GFD's -SHARED suffix also matches the product without it.
func (r *request) productOK(product string) bool {
	base, _ := strings.CutSuffix(product, sharedSuffix)
	for _, want := range r.products {
		if product == want || base == want {
			return true
		}
	}
	return false
}

// parseMiB parses a whole number of MiB: decimal digits only, no sign, no
// unit, no overflow. It does not allocate, so Filter may call it per node.
//
// guest.ParseInt would do but for overflow: it wraps some out-of-range
// values around ("92233720368547758090" reads as 10).
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
