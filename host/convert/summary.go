package convert

import (
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// PodSummaries converts the pods on a node, as NodeInfo sends them (sorted
// by namespace, name and uid), for a VictimsRequest.
func PodSummaries(pods []fwk.PodInfo) []*abiv1.PodSummary { return podSummaries(pods) }

// PodSummary converts one placed pod, as NodeInfo sends it, for a
// PodChange; nil when pi holds no pod.
func PodSummary(pi fwk.PodInfo) *abiv1.PodSummary {
	if s := podSummaries([]fwk.PodInfo{pi}); len(s) > 0 {
		return s[0]
	}
	return nil
}
