package main

import (
	"strconv"

	"github.com/wasmsched/wasmsched/guest"
)

// Policy is the gpu policy built from validated settings. Its methods are
// the extension points registered in main.go; like every policy function
// they are called from one goroutine at a time per instance.
type Policy struct {
	strategy        Strategy
	reserveGPUNodes bool
}

// New validates the settings and builds the policy.
func New(s Settings) (*Policy, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &Policy{strategy: s.Strategy, reserveGPUNodes: s.ReserveGPUNodes}, nil
}

// PreFilter parses the pod once per cycle into Cycle.State. It rejects a
// GPU pod with a malformed annotation on every node at once, and tells the
// host to skip Filter and NormalizeScore for a pod that requests no GPU.
func (p *Policy) PreFilter(c *guest.Cycle) guest.Status {
	r := parseRequest(c.Pod)
	c.State = r
	switch {
	case r.invalid.Code != 0:
		return r.invalid
	case r.gpus == 0:
		// Score's answers for a pod without GPUs are final.
		c.SkipNormalizeScore()
		return guest.SkipPoint()
	}
	return guest.OK()
}

// state returns the cycle's parsed pod, stored by PreFilter. The host runs
// PreFilter on every instance before the instance's other calls of the
// cycle, so parsing here is only a safeguard.
func state(c *guest.Cycle) *request {
	if r, ok := c.State.(*request); ok {
		return r
	}
	r := parseRequest(c.Pod)
	c.State = r
	return r
}

// Filter admits a node for a GPU pod when all of these hold:
//   - the node's GPUs are not shared, or the pod allows sharing;
//   - its product is one the pod wants, if the pod names products;
//   - its GPU memory is at least the pod's minimum, if it sets one;
//   - it has at least as many free GPUs as the pod requests.
//
// The rules that no preemption can change come first and reject with
// UnschedulableAndUnresolvable; only a shortage of GPUs that evicting pods
// could cure is Unschedulable. Pods that request no GPU pass every node.
//
// A node that passes costs no allocation; a rejection allocates only when
// its reason differs from the one the same rule gave last in the cycle.
func (p *Policy) Filter(c *guest.Cycle, n *guest.NodeInfo) guest.Status {
	r := state(c)
	if r.invalid.Code != 0 {
		return r.invalid
	}
	if r.gpus == 0 {
		return guest.OK()
	}
	free := n.Free(ResourceGPU)
	if n.Allocatable(ResourceGPU) < r.gpus {
		// Even an empty node could not hold the pod.
		if s, ok := r.tooSmall.lookup(free); ok {
			return s
		}
		return r.tooSmall.store(free, insufficient(guest.UnschedulableAndUnresolvable, r.gpus, free))
	}
	if s := r.checkSharing(n); !s.IsSuccess() {
		return s
	}
	if s := r.checkProduct(n); !s.IsSuccess() {
		return s
	}
	if s := r.checkMemory(n); !s.IsSuccess() {
		return s
	}
	if free < r.gpus {
		if s, ok := r.short.lookup(free); ok {
			return s
		}
		return r.short.store(free, insufficient(guest.Unschedulable, r.gpus, free))
	}
	return guest.OK()
}

func insufficient(code guest.Code, need, free int64) guest.Status {
	return guest.Status{Code: code, Reasons: []string{
		Name + ": insufficient free " + ResourceGPU + ": need " + strconv.FormatInt(need, 10) + ", free " + strconv.FormatInt(max(free, 0), 10),
	}}
}

func (r *request) checkSharing(n *guest.NodeInfo) guest.Status {
	strategy, ok := n.Label(LabelSharing)
	if !ok || strategy == notShared || r.allowShared {
		return guest.OK()
	}
	if s, ok := r.shared.lookup(strategy); ok {
		return s
	}
	return r.shared.store(strategy, guest.RejectUnresolvable("%s: shared GPUs not allowed: node has %s=%s, pod lacks annotation %s: \"true\"",
		Name, LabelSharing, strategy, AnnotationAllowShared))
}

func (r *request) checkProduct(n *guest.NodeInfo) guest.Status {
	if len(r.products) == 0 {
		return guest.OK()
	}
	product, ok := n.Label(LabelProduct)
	switch {
	case ok && r.productOK(product):
		return guest.OK()
	case !ok:
		if r.noProduct.Code == 0 {
			r.noProduct = guest.RejectUnresolvable("%s: wrong GPU product: want %s, node has no %s label", Name, r.wanted(), LabelProduct)
		}
		return r.noProduct
	}
	if s, ok := r.product.lookup(product); ok {
		return s
	}
	return r.product.store(product, guest.RejectUnresolvable("%s: wrong GPU product: want %s, node has %s", Name, r.wanted(), product))
}

func (r *request) checkMemory(n *guest.NodeInfo) guest.Status {
	if r.minMemoryMiB == 0 {
		return guest.OK()
	}
	label, ok := n.Label(LabelMemory)
	if !ok {
		if r.noMemory.Code == 0 {
			r.noMemory = guest.RejectUnresolvable("%s: insufficient GPU memory: need %d MiB, node has no %s label", Name, r.minMemoryMiB, LabelMemory)
		}
		return r.noMemory
	}
	mib, good := parseMiB(label)
	if !good {
		if s, ok := r.badMemory.lookup(label); ok {
			return s
		}
		return r.badMemory.store(label, guest.RejectUnresolvable("%s: unreadable GPU memory: node label %s is %q, not a whole number of MiB", Name, LabelMemory, label))
	}
	if mib >= r.minMemoryMiB {
		return guest.OK()
	}
	if s, ok := r.memory.lookup(label); ok {
		return s
	}
	return r.memory.store(label, guest.RejectUnresolvable("%s: insufficient GPU memory: need %d MiB, node has %d MiB", Name, r.minMemoryMiB, mib))
}

// Score gives, for a GPU pod, the raw number of GPUs the node would have
// free after placing the pod; NormalizeScore turns it into 0..100 by the
// strategy. For a pod that requests no GPU the score is final already: 0 on
// nodes with GPUs and 100 on others with reserveGPUNodes, 0 everywhere
// without.
func (p *Policy) Score(c *guest.Cycle, n *guest.NodeInfo) (int64, guest.Status) {
	r := state(c)
	if r.invalid.Code != 0 {
		return 0, r.invalid
	}
	if r.gpus == 0 {
		if p.reserveGPUNodes && n.Allocatable(ResourceGPU) <= 0 {
			return 100, guest.OK()
		}
		return 0, guest.OK()
	}
	return n.Free(ResourceGPU) - r.gpus, guest.OK()
}

// NormalizeScore maps a GPU pod's raw scores (GPUs left free) linearly
// onto 0..100: binpack gives 100 to the node left with the fewest free GPUs
// and 0 to the one left with the most, spread the reverse. When every node
// would be left with as many free GPUs, all score 100. Scores of pods that
// request no GPU are left as Score gave them.
func (p *Policy) NormalizeScore(c *guest.Cycle, scores []guest.NodeScore) guest.Status {
	r := state(c)
	if r.invalid.Code != 0 {
		return r.invalid
	}
	if r.gpus == 0 || len(scores) == 0 {
		return guest.OK()
	}
	lo, hi := scores[0].Score, scores[0].Score
	for _, s := range scores[1:] {
		lo, hi = min(lo, s.Score), max(hi, s.Score)
	}
	for i := range scores {
		left := scores[i].Score
		switch {
		case hi == lo:
			scores[i].Score = 100
		case p.strategy == Spread:
			scores[i].Score = (left - lo) * 100 / (hi - lo)
		default:
			scores[i].Score = (hi - left) * 100 / (hi - lo)
		}
	}
	return guest.OK()
}
