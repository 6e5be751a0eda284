package convert_test

import (
	"testing"

	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/wasmsched/wasmsched/host/convert"
)

func BenchmarkPodFromInfo(b *testing.B) {
	pi, err := framework.NewPodInfo(placedPods()[0])
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		convert.PodFromInfo(pi)
	}
}

func BenchmarkNodeInfo(b *testing.B) {
	ni := framework.NewNodeInfo(placedPods()...)
	ni.SetNode(gpuNode())
	for _, withPods := range []bool{false, true} {
		name := "without pods"
		if withPods {
			name = "with pods"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				convert.NodeInfo(1, ni, withPods)
			}
		})
	}
}

func BenchmarkPod(b *testing.B) {
	pod := placedPods()[0]
	b.ReportAllocs()
	for b.Loop() {
		convert.Pod(pod)
	}
}
