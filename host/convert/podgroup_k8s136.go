//go:build k8s1.36

package convert

import (
	schedv1alpha2 "k8s.io/api/scheduling/v1alpha2"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// PodGroup converts a PodGroup (scheduling.k8s.io/v1alpha2, Kubernetes
// 1.36, which has no priority) without its member counts, which the
// scheduler's cache holds. It returns nil for nil.
func PodGroup(pg *schedv1alpha2.PodGroup) *abiv1.PodGroup {
	if pg == nil {
		return nil
	}
	m := &abiv1.PodGroup{
		Namespace: pg.Namespace,
		Name:      pg.Name,
		Uid:       string(pg.UID),
		Labels:    keyValues(pg.Labels),
		Policy:    "basic",
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
		m.Policy, m.MinCount = "gang", g.MinCount
	}
	if c := pg.Spec.SchedulingConstraints; c != nil {
		for _, t := range c.Topology {
			m.TopologyKeys = append(m.TopologyKeys, t.Key)
		}
	}
	if r := pg.Spec.PodGroupTemplateRef; r != nil && r.Workload != nil {
		m.WorkloadName = r.Workload.WorkloadName
	}
	return m
}
