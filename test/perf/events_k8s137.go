//go:build !k8s1.35 && !k8s1.36

package perf

import fwk "k8s.io/kube-scheduler/framework"

// The pod resources the native twins register events for: 1.37 tells pods
// on nodes and the rejected pod itself apart from other pods.
const (
	assignedPod = fwk.AssignedPod
	targetPod   = fwk.TargetPod
)
