//go:build k8s1.35

package plugin

import (
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host/policy"
)

// withGroup: Kubernetes 1.35 has no pod-group cycle; policies see no group.
func (pl *Plugin) withGroup(fwk.CycleState, *v1.Pod, *policy.Cycle) (*fwk.Status, string) {
	return nil, ""
}

// groupEvents: no pod groups on 1.35.
func (pl *Plugin) groupEvents() []fwk.ClusterEventWithHint { return nil }
