//go:build !k8s1.35 && !k8s1.36

package convert

import (
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// PodGroup converts a PodGroup (scheduling.k8s.io/v1beta1, Kubernetes
// 1.37) without its member counts, which the scheduler's cache holds. It
// returns nil for nil.
func PodGroup(pg *schedv1beta1.PodGroup) *abiv1.PodGroup {
	if pg == nil {
		return nil
	}
	m := &abiv1.PodGroup{
		Namespace:         pg.Namespace,
		Name:              pg.Name,
		Uid:               string(pg.UID),
		Labels:            keyValues(pg.Labels),
		Policy:            "basic",
		PriorityClassName: pg.Spec.PriorityClassName,
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
		m.Policy, m.MinCount = "gang", g.MinCount
	}
	if c := pg.Spec.SchedulingConstraints; c != nil {
		for _, t := range c.Topology {
			m.TopologyKeys = append(m.TopologyKeys, t.Key)
		}
	}
	if p := pg.Spec.Priority; p != nil {
		m.Priority = *p
	}
	if w := pg.Spec.WorkloadRef; w != nil {
		m.WorkloadName = w.WorkloadName
	}
	return m
}
