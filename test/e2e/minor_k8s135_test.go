//go:build k8s1.35

package e2e

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/wasmsched/wasmsched/host/plugin"
)

// schedulePod runs the scheduler's own algorithm for pod (1.35: the pod).
func schedulePod(ctx context.Context, s *scheduler.Scheduler, fw framework.Framework, pod *v1.Pod) (scheduler.ScheduleResult, error) {
	return s.SchedulePod(ctx, fw, framework.NewCycleState(), pod)
}

// preBindPreFlight is the plugin's PreBindPreFlight status.
func preBindPreFlight(ctx context.Context, pl *plugin.Plugin, state fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	return pl.PreBindPreFlight(ctx, state, pod, node)
}
