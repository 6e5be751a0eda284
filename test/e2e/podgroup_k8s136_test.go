//go:build k8s1.36

package e2e

import (
	"context"

	schedv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/featuregate"
	"k8s.io/kubernetes/pkg/features"
)

// Kubernetes 1.36: Workload and PodGroup are scheduling.k8s.io/v1alpha2
// behind the alpha gates GenericWorkload and GangScheduling; placements
// behind TopologyAwareWorkloadScheduling.
const (
	groupAPI = "scheduling.k8s.io/v1alpha2"
	// placementNamed: 1.36's snapshot does not tell which placement it
	// tries.
	placementNamed = false
)

var groupGates = []featuregate.Feature{features.GenericWorkload, features.GangScheduling, features.TopologyAwareWorkloadScheduling}

// createPodGroup creates a gang PodGroup of minCount in namespace,
// constrained to topology key unless it is "".
func (c *cluster) createPodGroup(namespace, name string, minCount int, key string) {
	c.t.Helper()
	pg := &schedv1alpha2.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: schedv1alpha2.PodGroupSpec{SchedulingPolicy: schedv1alpha2.PodGroupSchedulingPolicy{
			Gang: &schedv1alpha2.GangSchedulingPolicy{MinCount: int32(minCount)}}}}
	if key != "" {
		pg.Spec.SchedulingConstraints = &schedv1alpha2.PodGroupSchedulingConstraints{Topology: []schedv1alpha2.TopologyConstraint{{Key: key}}}
	}
	if _, err := c.client.SchedulingV1alpha2().PodGroups(namespace).Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("create PodGroup %s: %v", name, err)
	}
}
