//go:build !nocontrolplane && !k8s1.35 && !k8s1.36

package plugin

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// TestBatchRescoreInScheduler runs a real scheduler (Kubernetes 1.37, whose
// opportunistic batching rescores the node the last pod went to while it
// still fits) with one policy that packs pods: its score is the number of
// pods on the node, normalised. The default plugins, which spread, are
// outweighed. Every pod after the first takes a batching hint, and the
// rescore leaves the other candidates' raw scores to the scheduler: only
// the rescored node's fresh score keeps the pods together, so a stale or
// misplaced one would spread them. Eight pods must fill two of the four
// nodes, four pods each, whether the policy normalises its scores or its
// raw scores are final.
func TestBatchRescoreInScheduler(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and a scheduler")
	}
	ctx := context.Background()
	cp := startCluster(t)
	c := cp.Client()
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("4")}
	for i := range 4 {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i)}, Status: v1.NodeStatus{Allocatable: alloc, Capacity: alloc}}
		if _, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const profile = "default-scheduler"
	scrape := func(name, result string) float64 {
		want := map[string]string{"profile": profile}
		if result != "" {
			want["result"] = result
		}
		return scraped(t, name, want)
	}
	// normalize: the policy's NormalizeScore (min-max) makes the combined
	// score, through the guest; without it, the raw pod count is final and
	// the rescore only checks its range.
	for _, normalize := range []bool{true, false} {
		args := map[string]any{"namespace": "default", "policies": []any{map[string]any{
			"name": "pack", "source": map[string]any{"file": testwasm.Path(t, "test/guests/probe")},
			"settings": map[string]any{
				"scorePods": true, "normalize": normalize,
				"signature": map[string]any{"annotationKeys": []string{"kind"}},
			},
		}}}
		spread := map[string]any{"name": "PodTopologySpread", "args": map[string]any{"defaultingType": "List"}}
		sched, err := cp.startScheduler(t, args, 10, spread)
		if err != nil {
			t.Fatalf("start-up: %v", err)
		}
		hints, rescores := scrape("scheduler_batch_attempts_total", "hint_used"), scrape("scheduler_batch_rescore_attempts_total", "")
		var names []string
		for i := range 8 {
			p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "default", Annotations: map[string]string{"kind": "a"}},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "pause",
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}}}}
			if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			names = append(names, p.Name)
		}
		perNode := map[string]int{}
		waitFor(t, "the pods bound", func() bool {
			clear(perNode)
			for _, n := range names {
				p, err := c.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{})
				if err != nil || p.Spec.NodeName == "" {
					return false
				}
				perNode[p.Spec.NodeName]++
			}
			return true
		})
		if counts := slices.Sorted(maps.Values(perNode)); !slices.Equal(counts, []int{4, 4}) {
			t.Fatalf("normalize %v: pods per node %v, want four on each of two nodes (the policy packs)", normalize, perNode)
		}
		hints, rescores = scrape("scheduler_batch_attempts_total", "hint_used")-hints, scrape("scheduler_batch_rescore_attempts_total", "")-rescores
		t.Logf("normalize %v: %v batching hints used, %v rescores", normalize, hints, rescores)
		if hints < 1 || rescores < 1 {
			t.Fatalf("normalize %v: %v batching hints used and %v rescores: the pods were not batched, so the rescore was not exercised", normalize, hints, rescores)
		}
		sched.Stop()
		if err := c.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the pods gone", func() bool {
			l, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			return err == nil && len(l.Items) == 0
		})
	}
}
