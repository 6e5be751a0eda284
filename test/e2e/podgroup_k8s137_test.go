//go:build !k8s1.35 && !k8s1.36

package e2e

import (
	"context"

	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/featuregate"
	"k8s.io/kubernetes/pkg/features"
)

// Kubernetes 1.37: Workload and PodGroup are scheduling.k8s.io/v1beta1
// behind GenericWorkload; placements behind TopologyAwareWorkloadScheduling.
const (
	groupAPI = "scheduling.k8s.io/v1beta1"
	// placementNamed: the scheduler's snapshot tells which placement it
	// tries, and the plugin passes its name on.
	placementNamed = true
)

var groupGates = []featuregate.Feature{features.GenericWorkload, features.TopologyAwareWorkloadScheduling}

// createPodGroup creates a gang PodGroup of minCount in namespace,
// constrained to topology key unless it is "".
func (c *cluster) createPodGroup(namespace, name string, minCount int, key string) {
	c.t.Helper()
	pg := &schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: schedv1beta1.PodGroupSpec{SchedulingPolicy: schedv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: int32(minCount)}}}}
	if key != "" {
		pg.Spec.SchedulingConstraints = &schedv1beta1.PodGroupSchedulingConstraints{Topology: []schedv1beta1.TopologyConstraint{{Key: key}}}
	}
	if _, err := c.client.SchedulingV1beta1().PodGroups(namespace).Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("create PodGroup %s: %v", name, err)
	}
}
