//go:build k8s1.35

package convert

import v1 "k8s.io/api/core/v1"

// PodGroupName is "" on Kubernetes 1.35: its pods name a Workload
// (spec.workloadRef, alpha), not a PodGroup, and the scheduler has no
// pod-group cycle, so policies see no group.
func PodGroupName(*v1.Pod) string { return "" }
