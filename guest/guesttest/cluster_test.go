package guesttest

import (
	"strings"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
)

var kindQuota = guest.Kind{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "elasticquotas"}

func TestMakeCluster(t *testing.T) {
	kinds := []guest.Kind{guest.KindPriorityClass, kindQuota, guest.KindNamespace}
	web := MakePod().Namespace("team-a").Name("web").Label("team", "blue").Req(map[string]int64{"cpu": 500, "nvidia.com/gpu": 1}).Placed()
	cl := MakeCluster().Objects(t, "testdata/cluster.yaml").
		Object(`{apiVersion: v1, kind: Namespace, metadata: {name: team-b}}`).
		Usage("", "team-b", map[string]string{"cpu": "1500m", "memory": "1Gi", "nvidia.com/gpu": "1"}, 2).
		Usage("", "gone", map[string]string{"cpu": "1"}, 0).
		UsageFromPods(web, web)
	c := cl.Cycle(MakePod().Namespace("team-a").Name("p").Obj(), kinds, MakeNode().Name("n").Obj())

	q := c.Object(kindQuota, "team-a", "quota")
	if q == nil || q.UID() != "eq-a" || q.ResourceVersion() != "12" {
		t.Fatalf("quota %v", q)
	}
	if got, want := q.Get("spec", "max").Resources(), (&abiv1.Resources{MilliCpu: 8000, Memory: 16 << 30, Scalars: []*abiv1.Scalar{{Name: "nvidia.com/gpu", Value: 4}}}); !sameResources(got, want) {
		t.Errorf("max %v, want %v", got, want)
	}
	if cpu, ok := q.Get("spec", "min", "cpu").Quantity(guest.ResourceCPU); cpu != 4000 || !ok {
		t.Errorf("min cpu %d, %v (a YAML number)", cpu, ok)
	}
	if q.Get("metadata", "managedFields").Exists() {
		t.Error("managedFields kept")
	}
	if kind, _ := q.Get("kind").String(); kind != "ElasticQuota" {
		t.Errorf("a custom resource lost its kind: %q", kind)
	}
	ns := c.Namespace("team-a")
	if v, _ := ns.Label("tenant"); v != "blue" || len(ns.Labels()) != 2 || ns.Labels()[0].Key != "tenant" {
		t.Errorf("namespace labels %v", ns.Labels())
	}
	if ns.Object().Get("kind").Exists() || ns.Object().Get("apiVersion").Exists() {
		t.Error("a built-in object kept apiVersion or kind, which typed objects do not carry")
	}
	if got := len(c.Objects(guest.KindNamespace)); got != 2 || c.PriorityClass("high").Value() != 1000 {
		t.Errorf("%d namespaces, priority %d", got, c.PriorityClass("high").Value())
	}
	if u := c.TenantUsage("", "team-b"); u.GetMilliCpu() != 1500 || u.GetMemory() != 1<<30 || guest.Quantity(u, "nvidia.com/gpu") != 1 || u.GetPods() != 2 {
		t.Errorf("team-b usage %v", u)
	}
	if u := c.TenantUsage("", "team-a"); u.GetMilliCpu() != 1000 || guest.Quantity(u, "nvidia.com/gpu") != 2 || u.GetPods() != 2 {
		t.Errorf("team-a usage from pods %v", u)
	}
	if u := c.TenantUsage("team", "blue"); u.GetPods() != 2 || c.TenantUsage("", "gone") != nil {
		t.Errorf("team=blue usage %v; a tenant without pods %v", u, c.TenantUsage("", "gone"))
	}
	if c.NodeByName("n") == nil || c.Pod.Name() != "p" {
		t.Error("the cycle lost its pod or nodes")
	}

	// A later sync: the quota changes, as the host would send it.
	changed := MakeCluster().Object(`
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: ElasticQuota
metadata: {name: quota, namespace: team-a, resourceVersion: "13"}
spec: {max: {cpu: 2}}
`)
	if err := c.ApplyContext(kinds, changed.Sync(kinds)); err != nil {
		t.Fatal(err)
	}
	if cpu, _ := c.Object(kindQuota, "team-a", "quota").Get("spec", "max", "cpu").Quantity("cpu"); cpu != 2000 {
		t.Errorf("max cpu after the change %d", cpu)
	}
	if s := cl.Sync([]guest.Kind{guest.KindNamespace}); len(s.Objects) != 2 || s.Objects[0].Kind != 0 {
		t.Errorf("sync for namespaces only: %v", s.Objects)
	}
}

func TestMakeClusterRefuses(t *testing.T) {
	for text, want := range map[string]string{
		`{kind: Namespace, metadata: {name: x}}`:   "needs apiVersion and kind",
		`{apiVersion: v1, kind: Namespace}`:        "has no metadata.name",
		`[1, 2]`:                                   "not a Kubernetes object",
		`{apiVersion: v1, kind: List, items: [3]}`: "item 1: not a Kubernetes object",
		"a: [": "not valid YAML",
		`{apiVersion: v1, kind: Namespace, metadata: {name: x, labels: {a: 1}}}`: "label a is not a string",
	} {
		func() {
			defer func() {
				if r, _ := recover().(string); !strings.Contains(r, want) {
					t.Errorf("%s: recovered %q, want %q", text, r, want)
				}
			}()
			MakeCluster().Object(text)
		}()
	}
}

func TestKindOf(t *testing.T) {
	for _, tc := range []struct {
		apiVersion, kind string
		want             guest.Kind
	}{
		{"v1", "Namespace", guest.KindNamespace},
		{"scheduling.k8s.io/v1", "PriorityClass", guest.KindPriorityClass},
		{"resource.k8s.io/v1", "ResourceSlice", guest.KindResourceSlice},
		{"resource.k8s.io/v1", "ResourceClaim", guest.KindResourceClaim},
		{"resource.k8s.io/v1", "DeviceClass", guest.KindDeviceClass},
		{"scheduling.x-k8s.io/v1alpha1", "ElasticQuota", kindQuota},
		{"topology.node.k8s.io/v1alpha2", "NodeResourceTopology", guest.Kind{Group: "topology.node.k8s.io", Version: "v1alpha2", Resource: "noderesourcetopologies"}},
		{"v1", "Endpoints", guest.Kind{Version: "v1", Resource: "endpoints"}},
	} {
		if got := KindOf(tc.apiVersion, tc.kind); got != tc.want {
			t.Errorf("KindOf(%s, %s) = %v, want %v", tc.apiVersion, tc.kind, got, tc.want)
		}
	}
}

// FuzzParseQuantity holds guest.ParseQuantity, exact integer arithmetic on
// digits, to this package's quantity conversion, which uses math/big:
// wherever both read a non-negative quantity they agree.
func FuzzParseQuantity(f *testing.F) {
	for _, s := range []string{"1", "500m", "1.5Gi", "0.3Ki", "1e3", "12e-1", "9223372036854775807", "123456789.123456789", "1E", "7Ei"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.TrimSpace(s) != s || strings.HasPrefix(s, "-") {
			return // amount trims; negatives round differently there
		}
		for _, resource := range []string{guest.ResourceCPU, guest.ResourceMemory} {
			want, werr := amount(resource, quantity(s))
			got, err := guest.ParseQuantity(s, resource)
			if werr == nil && (err != nil || got != want) {
				t.Fatalf("ParseQuantity(%q, %s) = %d, %v; math/big gives %d", s, resource, got, err, want)
			}
		}
	})
}

func sameResources(a, b *abiv1.Resources) bool {
	x, _ := a.MarshalVT()
	y, _ := b.MarshalVT()
	return string(x) == string(y)
}
