//go:build k8s1.35 || k8s1.36

package perf

import fwk "k8s.io/kube-scheduler/framework"

// Before 1.37 every pod event is a Pod event: the twins' hints tell the
// cases apart themselves.
const (
	assignedPod = fwk.Pod
	targetPod   = fwk.Pod
)
