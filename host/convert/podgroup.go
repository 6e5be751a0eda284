//go:build !k8s1.35

package convert

import v1 "k8s.io/api/core/v1"

// PodGroupName is the PodGroup the pod belongs to
// (spec.schedulingGroup.podGroupName, in the pod's namespace), or "".
func PodGroupName(pod *v1.Pod) string {
	if g := pod.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil {
		return *g.PodGroupName
	}
	return ""
}
