//go:build !k8s1.35

package convert

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// A member's pod carries the name of its PodGroup
// (spec.schedulingGroup.podGroupName); other pods none.
func TestPodGroupName(t *testing.T) {
	name := "train"
	pod := &v1.Pod{Spec: v1.PodSpec{SchedulingGroup: &v1.PodSchedulingGroup{PodGroupName: &name}}}
	if got := Pod(pod).GetPodGroup(); got != "train" {
		t.Errorf("Pod.pod_group %q, want train", got)
	}
	if got := Pod(&v1.Pod{}).GetPodGroup(); got != "" {
		t.Errorf("Pod.pod_group %q for a pod in no group", got)
	}
}
