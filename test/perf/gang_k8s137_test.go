//go:build !k8s1.35 && !k8s1.36

package perf

import frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

// gangAvailable: the Gang workload runs on Kubernetes 1.37, whose
// scheduler_perf creates PodGroups (createPodGroups, v1beta1) and whose
// framework has the placement points TopologyNative implements.
const gangAvailable = true

// gangNativeName is the Gang workload's native twin.
const gangNativeName = TopologyNativeName

// gangPlugins are the Gang workload's native plugins.
var gangPlugins = frameworkruntime.Registry{TopologyNativeName: NewTopologyNative}
