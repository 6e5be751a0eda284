// Command gpu is a wasmsched policy for pods that use NVIDIA GPUs. It keys
// on the extended resource nvidia.com/gpu and on the node labels written by
// NVIDIA GPU Feature Discovery (nvidia.com/gpu.product, nvidia.com/gpu.memory,
// nvidia.com/gpu.sharing-strategy).
//
// For a pod that requests GPUs, Filter admits only nodes with enough free
// GPUs, of a wanted product, with enough memory per GPU, and not shared
// unless the pod allows it; Score packs GPU pods tightly ("binpack") or
// spreads them ("spread"). A pod that requests no GPU passes every node and,
// with reserveGPUNodes, is steered away from GPU nodes. README.md lists the
// rules, settings and annotations.
//
// The logic lives in plain functions and types (settings.go, request.go,
// policy.go) so that it is tested natively; this file only registers it.
package main

import "github.com/wasmsched/wasmsched/guest"

// policy is the instance's policy, built from the operator's settings by
// the Settings hook before any other call.
var policy *Policy

func init() {
	guest.Register(&guest.Policy{
		Name: Name,
		Settings: func(raw []byte) (err error) {
			policy, err = guest.Load(raw, DefaultSettings(), New)
			return err
		},
		PreFilter:      func(c *guest.Cycle) guest.Status { return policy.PreFilter(c) },
		Filter:         func(c *guest.Cycle, n *guest.NodeInfo) guest.Status { return policy.Filter(c, n) },
		Score:          func(c *guest.Cycle, n *guest.NodeInfo) (int64, guest.Status) { return policy.Score(c, n) },
		NormalizeScore: func(c *guest.Cycle, scores []guest.NodeScore) guest.Status { return policy.NormalizeScore(c, scores) },
		// The rules read three annotations and the GPU request of the pod:
		// pods equal in them are batched together.
		Signature: &guest.Signature{
			AnnotationKeys: []string{AnnotationProduct, AnnotationMinMemory, AnnotationAllowShared},
			Resources:      []string{ResourceGPU},
		},
		// A rejection names a node's GPU labels, its GPU count, or its free
		// GPUs, which only a pod holding GPUs frees.
		Requeue: &guest.Requeue{
			NodeLabelKeys:   []string{LabelProduct, LabelMemory, LabelSharing},
			NodeAllocatable: true,
			PodDeleted:      &guest.PodMatch{Resources: []string{ResourceGPU}},
		},
	})
}

func main() {}
