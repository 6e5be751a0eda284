//go:build !k8s1.35 && !k8s1.36

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// TestSmokePodGroupPostFilter (Kubernetes 1.37, gates on): rack r1 has
// room for a gang of 4 by GPUs, but one of its two nodes is tainted, so the
// scheduler places only 2 members there and the gang fits no placement.
// The scheduler's PodGroupPostFilter plugins find no preemption; then the
// topology policy's PodGroupPostFilter says why: its reason is in the
// PodGroup's PodGroupInitiallyScheduled condition and on the members that
// did fit, and no member is bound.
func TestSmokePodGroupPostFilter(t *testing.T) {
	c := startGroupCluster(t, true)
	c.gpuNode("r1-a", "r1")
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("32"), v1.ResourceMemory: resource.MustParse("64Gi"),
		v1.ResourcePods: resource.MustParse("110"), gpu: resource.MustParse("8")}
	tainted := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "r1-b", Labels: map[string]string{"example.com/rack": "r1"}},
		Spec:   v1.NodeSpec{Taints: []v1.Taint{{Key: "example.com/maintenance", Effect: v1.TaintEffectNoSchedule}}},
		Status: v1.NodeStatus{Allocatable: alloc, Capacity: alloc}}
	if _, err := c.client.CoreV1().Nodes().Create(context.Background(), tainted, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := c.gang("train", 4, 4, "4")
	want := "policy topology: topology: gang default/train fit in none of the 1 example.com/rack domains with room for 4 pods × 4 nvidia.com/gpu (r1): members were turned away on their nodes"
	var cond string
	err := testwasm.Poll(t, 100*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, error) {
		pg, err := c.client.SchedulingV1beta1().PodGroups("default").Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cd := range pg.Status.Conditions {
			if cd.Type == "PodGroupInitiallyScheduled" && cd.Status == metav1.ConditionFalse {
				cond = cd.Message
			}
		}
		return strings.Contains(cond, want), nil
	})
	if err != nil {
		t.Fatalf("the PodGroup's condition %q does not contain %q: %v", cond, want, err)
	}
	fitted := 0
	for _, p := range pods {
		if strings.Contains(c.waitUnschedulable(p, 2*time.Minute), want) {
			fitted++
		}
	}
	if fitted != 2 {
		t.Errorf("%d members carry the policy's reason, want the 2 that fit r1-a", fitted)
	}
	for _, p := range pods {
		c.stayUnbound(p, 0)
	}
}
