//go:build k8s1.35 || k8s1.36

package perf

import frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

// gangAvailable: before 1.37, scheduler_perf cannot create PodGroups and
// the Gang workload is left out.
const gangAvailable = false

const gangNativeName = ""

var gangPlugins = frameworkruntime.Registry{}
