package clusterctx

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

func pod(ns, name, node, cpu string, labels map[string]string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), Labels: labels},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("1Ki"), "nvidia.com/gpu": resource.MustParse("1")}}}}},
	}
}

func usageSince(t *testing.T, u *Usage, namespaces bool, keys []string, seq uint64) (string, uint64) {
	t.Helper()
	out, next, _ := u.AppendSince(nil, namespaces, keys, seq)
	return summary(decode(t, out)), next
}

func cpu(u *Usage, key, tenant string) int64 {
	r := u.Get(key, tenant)
	if r == nil {
		return -1
	}
	return r.MilliCpu
}

func TestUsageExact(t *testing.T) {
	u := NewUsage()
	a := pod("ns", "a", "", "1", nil)
	b := pod("ns", "b", "", "500m", nil)
	steps := []struct {
		what string
		do   func()
		cpu  int64 // of namespace ns; -1 = none
	}{
		{"pending pod seen", func() { u.Set(a) }, -1},
		{"assumed", func() { u.Assume(a) }, 1000},
		{"assumed twice", func() { u.Assume(a) }, 1000},
		{"informer update, still unbound", func() { u.Set(a) }, 1000},
		{"second pod assumed (burst)", func() { u.Assume(b) }, 1500},
		{"second forgotten (unreserve)", func() { u.Forget(b) }, 1000},
		{"forgotten twice", func() { u.Forget(b) }, 1000},
		{"first bound", func() { u.Set(pod("ns", "a", "n1", "1", nil)) }, 1000},
		{"first forgotten after bind: still bound", func() { u.Forget(a) }, 1000},
		{"bound again (resync)", func() { u.Set(pod("ns", "a", "n1", "1", nil)) }, 1000},
		{"second bound without assume", func() { u.Set(pod("ns", "b", "n2", "500m", nil)) }, 1500},
		{"second succeeded", func() {
			p := pod("ns", "b", "n2", "500m", nil)
			p.Status.Phase = v1.PodSucceeded
			u.Set(p)
		}, 1000},
		{"second deleted after", func() { u.Delete(b) }, 1000},
		{"first being deleted", func() {
			p := pod("ns", "a", "n1", "1", nil)
			p.DeletionTimestamp = &metav1.Time{}
			u.Set(p)
		}, -1},
		{"first deleted", func() { u.Delete(a) }, -1},
		{"unknown deleted", func() { u.Delete(pod("x", "y", "", "1", nil)) }, -1},
	}
	for _, s := range steps {
		s.do()
		if got := cpu(u, "", "ns"); got != s.cpu {
			t.Fatalf("%s: cpu %d, want %d", s.what, got, s.cpu)
		}
	}
	if len(u.pods) != 0 {
		t.Fatalf("%d pod records left", len(u.pods))
	}
}

func TestUsageSums(t *testing.T) {
	u := NewUsage()
	u.Set(pod("a", "p1", "n", "1", nil))
	u.Set(pod("a", "p2", "n", "250m", nil))
	u.Set(pod("b", "p3", "n", "2", nil))
	r := u.Get("", "a")
	if r.MilliCpu != 1250 || r.Memory != 2048 || r.Pods != 2 || len(r.Scalars) != 1 || r.Scalars[0].Value != 2 {
		t.Fatalf("a: %v", r)
	}
	// The request changes (in-place resize): recounted, not added.
	u.Set(pod("a", "p2", "n", "750m", nil))
	if got := cpu(u, "", "a"); got != 1750 {
		t.Fatalf("after resize: %d", got)
	}
}

func TestUsageChangeLog(t *testing.T) {
	u := NewUsage()
	u.Set(pod("a", "p1", "n", "1", map[string]string{"team": "x"}))
	u.Set(pod("b", "p2", "n", "2", nil))
	got, pos := usageSince(t, u, true, nil, 0)
	if got != "=a:cpu1000,mem1024,pods1,nvidia.com/gpu1 =b:cpu2000,mem1024,pods1,nvidia.com/gpu1" {
		t.Fatalf("first: %q", got)
	}
	// Only a changes; many changes coalesce into one entry.
	for range 10 {
		u.Assume(pod("a", "p3", "", "1", nil))
		u.Forget(pod("a", "p3", "", "1", nil))
	}
	u.Assume(pod("a", "p3", "", "1", nil))
	got, pos = usageSince(t, u, true, nil, pos)
	if got != "=a:cpu2000,mem2048,pods2,nvidia.com/gpu2" {
		t.Fatalf("incremental: %q", got)
	}
	// A tenant that empties is sent with no pods (removal) incrementally,
	// and not at all from scratch.
	u.Delete(pod("b", "p2", "", "2", nil))
	if got, _ := usageSince(t, u, true, nil, pos); got != "=b:cpu0,mem0,pods0" {
		t.Fatalf("emptied: %q", got)
	}
	if got, _ := usageSince(t, u, true, nil, 0); got != "=a:cpu2000,mem2048,pods2,nvidia.com/gpu2" {
		t.Fatalf("from scratch: %q", got)
	}
	// Namespaces not wanted: nothing.
	if got, _ := usageSince(t, u, false, nil, 0); got != "" {
		t.Fatalf("no namespaces: %q", got)
	}
}

func TestUsageLabelKeys(t *testing.T) {
	u := NewUsage()
	u.Set(pod("a", "p1", "n", "1", map[string]string{"team": "x"}))
	u.Assume(pod("b", "p2", "", "2", map[string]string{"team": "x"}))
	u.Set(pod("c", "p3", "n", "4", map[string]string{"team": "y"}))
	u.Set(pod("c", "p4", "n", "8", nil))
	_, pos := usageSince(t, u, true, []string{"team"}, 0)
	// Watched later: known pods are recounted at once and sent.
	u.WatchKey("team")
	u.WatchKey("team")
	if cpu(u, "team", "x") != 3000 || cpu(u, "team", "y") != 4000 {
		t.Fatalf("x %d y %d", cpu(u, "team", "x"), cpu(u, "team", "y"))
	}
	got, pos := usageSince(t, u, false, []string{"team"}, pos)
	if got != "team=x:cpu3000,mem2048,pods2,nvidia.com/gpu2 team=y:cpu4000,mem1024,pods1,nvidia.com/gpu1" {
		t.Fatalf("after WatchKey: %q", got)
	}
	// A label change moves the pod between tenants.
	u.Set(pod("a", "p1", "n", "1", map[string]string{"team": "y"}))
	if cpu(u, "team", "x") != 2000 || cpu(u, "team", "y") != 5000 || cpu(u, "", "a") != 1000 {
		t.Fatalf("after relabel: x %d y %d a %d", cpu(u, "team", "x"), cpu(u, "team", "y"), cpu(u, "", "a"))
	}
	got, _ = usageSince(t, u, false, []string{"team"}, pos)
	if got != "team=x:cpu2000,mem1024,pods1,nvidia.com/gpu1 team=y:cpu5000,mem2048,pods2,nvidia.com/gpu2" {
		t.Fatalf("after relabel: %q", got)
	}
	// Keys not asked for are not sent.
	if got, _ := usageSince(t, u, false, []string{"other"}, 0); got != "" {
		t.Fatalf("other key: %q", got)
	}
}

func TestUsageHandler(t *testing.T) {
	u := NewUsage()
	h := u.Handler()
	h.OnAdd(pod("a", "p", "n", "1", nil), true)
	h.OnUpdate(nil, pod("a", "p", "n", "1", nil))
	if cpu(u, "", "a") != 1000 {
		t.Fatal("not counted")
	}
	h.OnDelete(cache.DeletedFinalStateUnknown{Obj: pod("a", "p", "n", "1", nil)})
	if u.Get("", "a") != nil {
		t.Fatal("still counted")
	}
}

func TestUsageCompaction(t *testing.T) {
	u := NewUsage()
	u.Set(pod("a", "keep", "n", "1", nil))
	_, pos := usageSince(t, u, true, nil, 0)
	for range 2000 {
		u.Assume(pod("b", "p", "", "1", nil))
		u.Forget(pod("b", "p", "", "1", nil))
	}
	if len(u.log) > 2*len(u.tenants)+logSlack {
		t.Fatalf("log %d records", len(u.log))
	}
	if got, _ := usageSince(t, u, true, nil, pos); got != "=b:cpu0,mem0,pods0" {
		t.Fatalf("%q", got)
	}
}
