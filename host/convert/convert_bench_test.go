package convert_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"
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

// BenchmarkPodContainers: a pending pod of three app containers (their
// requests summed directly) against the same pod with an init container
// (CalculateResource).
func BenchmarkPodContainers(b *testing.B) {
	spec := v1.PodSpec{Containers: []v1.Container{
		container("web", list("cpu", "500m", "memory", "512Mi"), nil),
		container("sidecar", list("cpu", "100m", "memory", "64Mi"), nil),
		container("metrics", list("cpu", "50m", "memory", "32Mi"), nil),
	}}
	apps := podWith("apps", spec)
	spec.InitContainers = []v1.Container{container("init", list("cpu", "100m"), nil)}
	withInit := podWith("with-init", spec)
	for _, pod := range []*v1.Pod{apps, withInit} {
		b.Run(pod.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				convert.Pod(pod)
			}
		})
	}
}
