//go:build k8s1.35 || k8s1.36

package perf

import frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

// gangAvailable: before 1.37, scheduler_perf cannot create PodGroups and
// the Gang workload is left out.
const gangAvailable = false

const gangNativeName = ""

var gangPlugins = frameworkruntime.Registry{}

// checkGang is never called before 1.37 (gangAvailable).
func checkGang(tCtx tContext, _ string, _ *bindWatch) *gangCounts {
	tCtx.Errorf("the Gang workload needs Kubernetes 1.37")
	return nil
}
