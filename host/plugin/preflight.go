//go:build !k8s1.35

package plugin

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// PreBindPreFlight skips PreBind when no policy exports it. From 1.36 it
// also says whether PreBind may run beside other plugins' PreBind: no, a
// policy's PreBind may depend on what ran before it.
func (pl *Plugin) PreBindPreFlight(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	return nil, preBindPreFlight(cs)
}
