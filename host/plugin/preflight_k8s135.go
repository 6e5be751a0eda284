//go:build k8s1.35

package plugin

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// PreBindPreFlight skips PreBind when no policy exports it (1.35 signature).
func (pl *Plugin) PreBindPreFlight(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	return preBindPreFlight(cs)
}
