//go:build !k8s1.35

package e2e

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/wasmsched/wasmsched/host/plugin"
)

// schedulePod runs the scheduler's own algorithm for pod. From 1.36 it
// takes the queued pod, and the scheduling cycle around it, not
// SchedulePod, refreshes the snapshot from the cache: done here, on the
// snapshot the scheduler shares with its frameworks.
func schedulePod(ctx context.Context, s *scheduler.Scheduler, fw framework.Framework, pod *v1.Pod) (scheduler.ScheduleResult, error) {
	snapshot, ok := fw.SnapshotSharedLister().(*cache.Snapshot)
	if !ok {
		return scheduler.ScheduleResult{}, fmt.Errorf("the framework's snapshot is a %T, not the scheduler's *cache.Snapshot", fw.SnapshotSharedLister())
	}
	if err := s.Cache.UpdateSnapshot(klog.FromContext(ctx), snapshot); err != nil {
		return scheduler.ScheduleResult{}, err
	}
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		return scheduler.ScheduleResult{}, err
	}
	return s.SchedulePod(ctx, fw, framework.NewCycleState(), &framework.QueuedPodInfo{PodInfo: pi})
}

// preBindPreFlight is the plugin's PreBindPreFlight status (1.36 added a
// result beside it).
func preBindPreFlight(ctx context.Context, pl *plugin.Plugin, state fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	_, s := pl.PreBindPreFlight(ctx, state, pod, node)
	return s
}
