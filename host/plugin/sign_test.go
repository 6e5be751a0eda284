//go:build !nocontrolplane

// Left out with -tags nocontrolplane: make test runs this package under the
// race detector without the tests that start a control plane, which would
// link the API server, compiled with -race on 2 cores at a cold cache, for
// them alone; they run without -race (Makefile, CP_PKGS).

package plugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// scraped sums the samples of the counter name whose labels include want.
func scraped(t *testing.T, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	sample:
		for _, m := range mf.GetMetric() {
			for k, v := range want {
				found := false
				for _, lp := range m.GetLabel() {
					found = found || (lp.GetName() == k && lp.GetValue() == v)
				}
				if !found {
					continue sample
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// TestBatchingAndHintsInScheduler runs a real scheduler with a policy that
// declares what it reads of the pod (one annotation) and which events can
// undo its rejections (one node label).
//
// Batching: the scheduler reuses a cycle's results for the next pod of
// equal signature, and every pod still lands exactly where the policy's
// scores put it: pods preferring high ranks take the highest nodes, pods
// preferring low ranks the lowest, although both kinds are equal in all
// the default plugins read.
//
// Hints: a pod the policy rejected is not retried when pods come and go or
// an undeclared node label changes, and is retried (and binds) as soon as
// the declared label goes from a node.
func TestBatchingAndHintsInScheduler(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and a scheduler")
	}
	ctx := context.Background()
	cp := startCluster(t)
	const profile = "default-scheduler"
	args := map[string]any{"namespace": "default", "policies": []any{map[string]any{
		"name": "ranked", "source": map[string]any{"file": testwasm.Path(t, "test/guests/probe")},
		"settings": map[string]any{
			"scoreLabel": "rank", "preferAnnotation": "prefer", "rejectLabel": "closed",
			"signature": map[string]any{"annotationKeys": []string{"prefer"}},
			"requeue":   map[string]any{"nodeLabelKeys": []string{"closed"}},
		},
	}}}
	// The system's default spreading constraints make every pod unsignable
	// (PodTopologySpread refuses to sign under them).
	spread := map[string]any{"name": "PodTopologySpread", "args": map[string]any{"defaultingType": "List"}}
	if err := cp.scheduler(t, args, 10, spread); err != nil {
		t.Fatalf("start-up: %v", err)
	}
	c := cp.Client()

	// Ten nodes ranked 0..90, room for one pod each.
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("1")}
	for i := range 10 {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), Labels: map[string]string{"rank": strconv.Itoa(i * 10)}},
			Status: v1.NodeStatus{Allocatable: alloc, Capacity: alloc}}
		if _, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mkPod := func(name, prefer, node string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{"prefer": prefer}},
			Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "pause",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}}}}
		if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	placed := func(names ...string) []string {
		var out []string
		for _, n := range names {
			p, err := c.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{})
			if err != nil || p.Spec.NodeName == "" {
				return nil
			}
			out = append(out, p.Spec.NodeName)
		}
		slices.Sort(out)
		return out
	}
	hints := func() float64 {
		return scraped(t, "scheduler_batch_attempts_total", map[string]string{"profile": profile, "result": "hint_used"})
	}

	for _, tc := range []struct {
		prefer string
		want   []string
	}{
		{"high", []string{"n6", "n7", "n8", "n9"}},
		{"low", []string{"n0", "n1", "n2", "n3"}},
	} {
		before := hints()
		var names []string
		for i := range 4 {
			names = append(names, fmt.Sprintf("%s-%d", tc.prefer, i))
			mkPod(names[i], tc.prefer, "")
		}
		var got []string
		waitFor(t, "the "+tc.prefer+" pods bound", func() bool { got = placed(names...); return got != nil })
		if !slices.Equal(got, tc.want) {
			t.Fatalf("pods preferring %s ranks on %v, want %v", tc.prefer, got, tc.want)
		}
		if used := hints() - before; used < 1 {
			t.Errorf("pods preferring %s: no batching hint used; the profile's batching is off or the pods never signed alike", tc.prefer)
		} else {
			t.Logf("pods preferring %s: %v batching hints used", tc.prefer, used)
		}
	}
	if err := c.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pods gone", func() bool {
		l, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0
	})

	// Every node closed: the policy rejects the next pod everywhere.
	setLabel := func(node, key, value string) {
		t.Helper()
		n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if value == "" {
			delete(n.Labels, key)
		} else {
			n.Labels[key] = value
		}
		if _, err := c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		setLabel(fmt.Sprintf("n%d", i), "closed", "yes")
	}
	attempts := func() float64 {
		return scraped(t, "scheduler_schedule_attempts_total", map[string]string{"profile": profile, "result": "unschedulable"})
	}
	before := attempts()
	mkPod("waiting", "high", "")
	waitFor(t, "the waiting pod rejected", func() bool { return attempts() > before })
	// Let a retry the rejection itself may cause (none expected) pass.
	time.Sleep(2 * time.Second)
	rejected := attempts()

	// Pods come and go, and an undeclared label changes: nothing the
	// policy declared, so the pod is not retried.
	mkPod("churn", "low", "n0")
	if err := c.CoreV1().Pods("default").Delete(ctx, "churn", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	setLabel("n1", "other", "1")
	time.Sleep(3 * time.Second)
	if got := attempts(); got != rejected {
		t.Fatalf("the waiting pod was retried %v times after pod churn and an undeclared label change; its policy declared neither", got-rejected)
	}
	if got := placed("waiting"); got != nil {
		t.Fatalf("waiting pod bound to %v while every node is closed", got)
	}

	// The declared label goes from n7: the pod is retried and binds there
	// (well before the scheduler's periodic flush).
	setLabel("n7", "closed", "")
	waitFor(t, "the waiting pod bound", func() bool { return placed("waiting") != nil })
	if got := placed("waiting"); !slices.Equal(got, []string{"n7"}) {
		t.Fatalf("waiting pod on %v, want n7, the only open node", got)
	}
}

// TestSwapRequeuesOnlyItsRejections: a new version of one policy retries
// the pods that policy rejected, and leaves alone those another policy of
// the profile rejected (a swap used to retry every pending pod).
func TestSwapRequeuesOnlyItsRejections(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and a scheduler")
	}
	ctx := context.Background()
	cp := startCluster(t)
	probe := testwasm.Bytes(t, "test/guests/probe")
	var policies []any
	for _, name := range []string{"alpha", "beta"} {
		path := filepath.Join(cp.dir, name+".wasm")
		if err := os.WriteFile(path, probe, 0o600); err != nil {
			t.Fatal(err)
		}
		// alpha rejects pods without annotation alpha, beta those without beta.
		policies = append(policies, map[string]any{"name": name, "source": map[string]any{"file": path},
			"settings": map[string]any{"needAnnotation": name}})
	}
	const profile = "default-scheduler"
	if err := cp.scheduler(t, map[string]any{"namespace": "default", "policies": policies}, 0); err != nil {
		t.Fatalf("start-up: %v", err)
	}
	c := cp.Client()
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("10")}
	if _, err := c.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Allocatable: alloc, Capacity: alloc}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	attempts := func() float64 {
		return scraped(t, "scheduler_schedule_attempts_total", map[string]string{"profile": profile, "result": "unschedulable"})
	}
	swapRequeues := func() float64 {
		return scraped(t, "wasmsched_requeued_pods_total", map[string]string{"profile": profile, "cause": "swap"})
	}
	before := attempts()
	// x passes beta only (alpha rejects it), y passes alpha only.
	for name, annotation := range map[string]string{"x": "beta", "y": "alpha"} {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{annotation: "yes"}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "pause"}}}}
		if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "both pods rejected", func() bool { return attempts() >= before+2 })
	time.Sleep(2 * time.Second)
	rejected, requeued := attempts(), swapRequeues()

	// A new version of alpha (the same rules, other bytes: a custom section
	// appended): x is retried, and rejected again; y is not retried.
	module := append(slices.Clone(probe), 0x00, 0x05, 0x04, 'n', 'o', 't', 'e')
	if err := os.WriteFile(filepath.Join(cp.dir, "alpha.wasm"), module, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "alpha's new version to requeue its pod", func() bool { return swapRequeues() > requeued })
	waitFor(t, "x retried", func() bool { return attempts() > rejected })
	time.Sleep(2 * time.Second)
	if got := swapRequeues() - requeued; got != 1 {
		t.Errorf("alpha's swap requeued %v pods, want 1 (x)", got)
	}
	if got := attempts() - rejected; got != 1 {
		t.Errorf("after alpha's swap, %v attempts failed, want 1: x's; y, which beta rejected, must not be retried", got)
	}
}
