package policy

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/clusterctx"
)

const contextSettings = `{"context": ["v1/namespaces", "scheduling.x-k8s.io/v1alpha1/elasticquotas"], "namespaceUsage": true, "usageLabelKeys": ["team"]}`

func elasticQuota(ns, name, rv string, pad int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
		"metadata": map[string]any{"namespace": ns, "name": name, "uid": "uid-" + ns + "-" + name, "resourceVersion": rv,
			"annotations": map[string]any{"pad": strings.Repeat("x", pad)}},
		"spec": map[string]any{"min": map[string]any{"cpu": "2", "memory": "4Gi"}, "max": map[string]any{"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2"}},
	}}
}

type contextFixture struct {
	ns, eq *clusterctx.Store
	usage  *clusterctx.Usage
	sent   []*abiv1.NodeSync
	sizes  []int
}

func bindContext(t testing.TB, p *Policy) *contextFixture {
	f := &contextFixture{ns: clusterctx.NewStore(clusterctx.KindNamespace), eq: clusterctx.NewStore(clusterctx.KindElasticQuota), usage: clusterctx.NewUsage()}
	f.usage.WatchKey("team")
	if err := p.Bind(&clusterctx.Binding{Stores: []*clusterctx.Store{f.ns, f.eq}, Usage: f.usage, Namespaces: true, LabelKeys: []string{"team"}}); err != nil {
		t.Fatal(err)
	}
	p.onContextSync = func(req []byte) {
		var m abiv1.NodeSync
		if err := m.UnmarshalVT(req); err != nil {
			t.Errorf("context request does not decode: %v", err)
		}
		f.sent = append(f.sent, &m)
		f.sizes = append(f.sizes, len(req))
	}
	return f
}

// cycle runs one Filter cycle and returns what was sent before it.
func (f *contextFixture) cycle(t *testing.T, p *Policy) string {
	t.Helper()
	f.sent = nil
	n := mkNode("n1", nil)
	if _, err := p.Filter(ctx, NewCycle(mkPod("p"), []fwk.NodeInfo{n}), n); err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, m := range f.sent {
		for _, k := range m.ObjectsReset {
			parts = append(parts, fmt.Sprintf("reset%d", k))
		}
		for _, o := range m.Objects {
			parts = append(parts, fmt.Sprintf("+%d:%s/%s@%s", o.Kind, o.Namespace, o.Name, o.ResourceVersion))
		}
		for _, o := range m.ObjectsRemoved {
			parts = append(parts, fmt.Sprintf("-%d:%s/%s", o.Kind, o.Namespace, o.Name))
		}
		for _, u := range m.TenantUsage {
			parts = append(parts, fmt.Sprintf("%s=%s:%d/%d", u.Key, u.Tenant, u.Requested.GetMilliCpu(), u.Requested.GetPods()))
		}
	}
	return strings.Join(parts, " ")
}

func TestContextUnbound(t *testing.T) {
	p := load(t, contextSettings)
	kinds := p.ContextKinds()
	if len(kinds) != 2 || kinds[0] != clusterctx.KindNamespace || kinds[1] != clusterctx.KindElasticQuota {
		t.Fatalf("ContextKinds %v", kinds)
	}
	n := mkNode("n1", nil)
	_, err := p.Filter(ctx, NewCycle(mkPod("p"), []fwk.NodeInfo{n}), n)
	if err == nil || !strings.Contains(err.Error(), "never bound") || !strings.Contains(err.Error(), "probe") {
		t.Fatalf("unbound: %v", err)
	}
	for _, b := range []*clusterctx.Binding{
		{},
		{Stores: []*clusterctx.Store{clusterctx.NewStore(clusterctx.KindElasticQuota), clusterctx.NewStore(clusterctx.KindNamespace)}},
		{Stores: []*clusterctx.Store{clusterctx.NewStore(clusterctx.KindNamespace), clusterctx.NewStore(clusterctx.KindElasticQuota)}, Usage: clusterctx.NewUsage(), Namespaces: true},
	} {
		if err := p.Bind(b); err == nil {
			t.Fatalf("Bind(%+v) accepted", b)
		}
	}
	// A policy without context needs no binding.
	plain := load(t, `{}`)
	if _, err := plain.Filter(ctx, NewCycle(mkPod("p"), []fwk.NodeInfo{n}), n); err != nil {
		t.Fatal(err)
	}
}

func TestContextSync(t *testing.T) {
	p := load(t, contextSettings)
	f := bindContext(t, p)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.ns.Set(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", ResourceVersion: "1"}}))
	must(f.eq.Set(elasticQuota("team-a", "q", "1", 0)))
	pod := mkPod("running")
	pod.Namespace, pod.Labels, pod.Spec.NodeName = "team-a", map[string]string{"team": "x"}, "n1"
	f.usage.Set(pod)
	if got := f.cycle(t, p); got != "+0:/team-a@1 +1:team-a/q@1 =team-a:100/1 team=x:100/1" {
		t.Fatalf("first cycle: %q", got)
	}
	if got := f.cycle(t, p); got != "" {
		t.Fatalf("nothing changed: %q", got)
	}
	for i := range 5 {
		must(f.eq.Set(elasticQuota("team-a", "q", fmt.Sprint(i+2), 0)))
	}
	assumed := mkPod("assumed")
	assumed.Namespace = "team-a"
	f.usage.Assume(assumed)
	if got := f.cycle(t, p); got != "+1:team-a/q@6 =team-a:200/2" {
		t.Fatalf("after changes: %q", got)
	}
	f.ns.Delete("", "team-a")
	f.usage.Forget(assumed)
	f.usage.Delete(pod)
	if got := f.cycle(t, p); got != "-0:/team-a =team-a:0/0 team=x:0/0" {
		t.Fatalf("after deletes: %q", got)
	}
	st := p.Stats()
	if st.ObjectsSent != 4 || st.TenantUsageSent != 5 {
		t.Fatalf("stats %+v", st)
	}
}

// Context larger than one request goes in several, none over the bound.
func TestContextBatches(t *testing.T) {
	p := load(t, contextSettings)
	f := bindContext(t, p)
	const objects = 100
	for i := range objects {
		if err := f.eq.Set(elasticQuota("ns", fmt.Sprint("q", i), "1", 100<<10)); err != nil {
			t.Fatal(err)
		}
	}
	f.cycle(t, p)
	if len(f.sent) < 2 {
		t.Fatalf("%d requests for %d objects of 100 KiB", len(f.sent), objects)
	}
	total := 0
	for i, m := range f.sent {
		if f.sizes[i] > maxSyncBatch {
			t.Fatalf("request %d: %d bytes", i, f.sizes[i])
		}
		total += len(m.Objects)
	}
	if total != objects || p.Stats().ObjectsSent != objects {
		t.Fatalf("%d objects sent, stats %d", total, p.Stats().ObjectsSent)
	}
}

// The guest (the SDK) holds what was sent: objects and usage as the host's
// stores have them, after changes and removals.
func TestContextResident(t *testing.T) {
	p := load(t, `{"context": ["v1/namespaces", "scheduling.x-k8s.io/v1alpha1/elasticquotas"], "namespaceUsage": true, "usageLabelKeys": ["team"], "showContext": true}`)
	f := bindContext(t, p)
	seen := func() string {
		t.Helper()
		n := mkNode("n1", nil)
		c := NewCycle(mkPod("p"), []fwk.NodeInfo{n})
		st, err := p.PreFilter(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(st.Status.Reasons, ";")
	}
	for _, ns := range []string{"b", "a"} {
		if err := f.ns.Set(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, ResourceVersion: "1"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.eq.Set(elasticQuota("a", "q", "1", 0)); err != nil {
		t.Fatal(err)
	}
	running := mkPod("running")
	running.Namespace, running.Labels, running.Spec.NodeName = "a", map[string]string{"team": "x"}, "n1"
	f.usage.Set(running)
	if got := seen(); got != "context: 0:/a 0:/b 1:a/q =a:100/1 team=x:100/1" {
		t.Fatalf("first: %q", got)
	}
	f.ns.Delete("", "b")
	f.usage.Delete(running)
	if err := f.eq.Set(elasticQuota("a", "q2", "1", 0)); err != nil {
		t.Fatal(err)
	}
	if got := seen(); got != "context: 0:/a 1:a/q 1:a/q2" {
		t.Fatalf("after changes: %q", got)
	}
}
