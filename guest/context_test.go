package guest

import (
	"slices"
	"strings"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

var kindQuota = Kind{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "elasticquotas"}

// contextInstance installs an instance whose policy declares namespaces
// and elastic quotas, initialised as the host does, and returns a function
// that sends it a sync.
func contextInstance(t *testing.T) func(m *abiv1.NodeSync) uint32 {
	t.Helper()
	inst = &instance{policy: &Policy{Name: "t", Context: []Kind{KindNamespace, kindQuota}, NamespaceUsage: true, UsageLabelKeys: []string{"team"}}}
	t.Cleanup(func() { inst = &instance{} })
	b := marshal(t, &abiv1.InitRequest{HostAbiVersion: ABIVersion})
	copy(inst.buffer(uint32(len(b))), b)
	if code := inst.init(uint32(len(b))); code != uint32(Success) {
		t.Fatalf("init answered %d", code)
	}
	return func(m *abiv1.NodeSync) uint32 {
		b := marshal(t, m)
		copy(inst.buffer(uint32(len(b))), b)
		return inst.sync(uint32(len(b)))
	}
}

func names(objs []*Object) string {
	var s []string
	for _, o := range objs {
		s = append(s, o.Namespace()+"/"+o.Name()+"@"+o.ResourceVersion())
	}
	return strings.Join(s, " ")
}

func tenantList(c *Cycle, key string) string {
	var s []string
	c.EachTenant(key, func(tenant string, used *abiv1.Resources) bool {
		s = append(s, tenant+"="+itoa(used.GetMilliCpu())+"m/"+itoa(used.GetPods()))
		return true
	})
	return strings.Join(s, " ")
}

func quota(ns, name, rv string) *abiv1.ContextObject {
	return &abiv1.ContextObject{Kind: 1, Namespace: ns, Name: name, ResourceVersion: rv,
		Json: []byte(`{"metadata":{"name":"` + name + `"},"spec":{"max":{"cpu":"` + rv + `"}}}`)}
}

func ns(name, rv string, labels ...*abiv1.KeyValue) *abiv1.ContextObject {
	return &abiv1.ContextObject{Kind: 0, Name: name, ResourceVersion: rv, Labels: labels}
}

func usage(key, tenant string, milli, pods int64) *abiv1.TenantUsage {
	return &abiv1.TenantUsage{Key: key, Tenant: tenant, Requested: &abiv1.Resources{MilliCpu: milli, Pods: pods}}
}

// TestSyncContext applies syncs of objects and tenant usage in the order
// the ABI gives (reset, upserts, removals, usage) and reads them through a
// cycle: sorted views rebuilt after changes, a slice held from before left
// as it was, usage removed by an entry without pods.
func TestSyncContext(t *testing.T) {
	sync := contextInstance(t)
	if got := inst.info.GetContextKinds(); len(got) != 2 || got[1].GetResource() != "elasticquotas" {
		t.Fatalf("PolicyInfo.context_kinds %v", got)
	}
	first := &abiv1.NodeSync{
		Objects: []*abiv1.ContextObject{quota("b", "q", "1"), quota("a", "z", "1"), quota("a", "q", "1"), ns("team-b", "1"),
			ns("team-a", "1", &abiv1.KeyValue{Key: "tenant", Value: "blue"})},
		TenantUsage: []*abiv1.TenantUsage{usage("", "team-b", 500, 1), usage("", "team-a", 1500, 2), usage("team", "blue", 2000, 3)},
	}
	if code := sync(first); code != uint32(Success) {
		t.Fatalf("sync answered %d: %v", code, inst.result.Reasons)
	}
	c := &Cycle{in: inst}
	if got := names(c.Objects(kindQuota)); got != "a/q@1 a/z@1 b/q@1" {
		t.Errorf("quotas %q, want them sorted by namespace and name", got)
	}
	if got := names(c.Objects(KindNamespace)); got != "/team-a@1 /team-b@1" {
		t.Errorf("namespaces %q", got)
	}
	a := c.Object(KindNamespace, "", "team-a")
	if v, ok := a.Label("tenant"); !ok || v != "blue" || a.Kind() != KindNamespace {
		t.Errorf("team-a: label %q, %v, kind %v", v, ok, a.Kind())
	}
	if c.Object(kindQuota, "", "q") != nil || c.Object(kindQuota, "c", "q") != nil {
		t.Error("an object found under another namespace")
	}
	if got := tenantList(c, ""); got != "team-a=1500m/2 team-b=500m/1" {
		t.Errorf("namespace usage %q", got)
	}
	if got := c.TenantUsage("team", "blue").GetMilliCpu(); got != 2000 {
		t.Errorf("usage of team=blue: %d", got)
	}
	held := c.Objects(kindQuota)
	heldQ := c.Object(kindQuota, "a", "q")
	cpu, _ := heldQ.Get("spec", "max", "cpu").String()

	second := &abiv1.NodeSync{
		ObjectsReset: []int32{0},
		Objects:      []*abiv1.ContextObject{ns("team-c", "2"), quota("a", "q", "2"), quota("c", "a", "2")},
		ObjectsRemoved: []*abiv1.ObjectRef{{Kind: 1, Namespace: "a", Name: "z"}, {Kind: 1, Namespace: "nope", Name: "nope"},
			{Kind: 1, Namespace: "c", Name: "a"}},
		TenantUsage: []*abiv1.TenantUsage{usage("", "team-b", 0, 0), usage("", "team-c", 100, 1), {Key: "team", Tenant: "blue"}, usage("team", "absent", 0, 0)},
	}
	if code := sync(second); code != uint32(Success) {
		t.Fatalf("second sync answered %d: %v", code, inst.result.Reasons)
	}
	if got := names(c.Objects(KindNamespace)); got != "/team-c@2" {
		t.Errorf("namespaces after the reset %q, want only the one sent after it", got)
	}
	if got := names(c.Objects(kindQuota)); got != "a/q@2 b/q@1" {
		t.Errorf("quotas after the second sync %q (upserted, then removed the same sync: gone)", got)
	}
	if got := names(held); got != "a/q@1 a/z@1 b/q@1" {
		t.Errorf("the slice held from before became %q", got)
	}
	if v, _ := c.Object(kindQuota, "a", "q").Get("spec", "max", "cpu").String(); v != "2" || cpu != "1" {
		t.Errorf("cpu of a/q: now %q, held %q", v, cpu)
	}
	if got := tenantList(c, ""); got != "team-a=1500m/2 team-c=100m/1" {
		t.Errorf("namespace usage after the second sync %q", got)
	}
	if got := tenantList(c, "team"); got != "" || c.TenantUsage("team", "blue") != nil {
		t.Errorf("team usage %q after its only tenant went", got)
	}
	n := 0
	c.EachTenant("", func(string, *abiv1.Resources) bool { n++; return false })
	if n != 1 {
		t.Errorf("EachTenant went on after false: %d calls", n)
	}
}

// TestSyncContextRefusesBadKinds refuses a sync with a kind index out of
// range, in any field, naming it, and applies nothing of it.
func TestSyncContextRefusesBadKinds(t *testing.T) {
	sync := contextInstance(t)
	if code := sync(&abiv1.NodeSync{Objects: []*abiv1.ContextObject{quota("a", "q", "1")}}); code != uint32(Success) {
		t.Fatalf("sync answered %d", code)
	}
	for _, m := range []*abiv1.NodeSync{
		{ObjectsReset: []int32{1, 2}},
		{Objects: []*abiv1.ContextObject{{Kind: -1, Name: "x"}}},
		{ObjectsReset: []int32{1}, ObjectsRemoved: []*abiv1.ObjectRef{{Kind: 7, Name: "x"}}},
	} {
		code := sync(m)
		if code != uint32(Error) || len(inst.result.Reasons) != 1 || !strings.Contains(inst.result.Reasons[0], "out of range: the policy declares 2 kinds") {
			t.Errorf("%v: code %d, reasons %q", m, code, inst.result.Reasons)
		}
	}
	if got := names((&Cycle{in: inst}).Objects(kindQuota)); got != "a/q@1" {
		t.Errorf("quotas %q after refused syncs", got)
	}
	// Before init no kind is declared.
	inst = &instance{policy: &Policy{}}
	if code := sync(&abiv1.NodeSync{Objects: []*abiv1.ContextObject{{Kind: 0}}}); code != uint32(Error) {
		t.Errorf("objects before init: code %d", code)
	}
}

func TestUndeclaredKindPanics(t *testing.T) {
	contextInstance(t)
	for _, c := range []*Cycle{{in: inst}, {}, NewCycle(nil, nil)} {
		func() {
			defer func() {
				r, _ := recover().(string)
				if !strings.Contains(r, "reads resource.k8s.io/v1/deviceclasses but does not declare it in Policy.Context") {
					t.Errorf("recovered %q", r)
				}
			}()
			c.Objects(KindDeviceClass)
		}()
	}
}

func TestApplyContext(t *testing.T) {
	kinds := []Kind{KindNamespace, kindQuota}
	c := NewCycle(nil, nil)
	if err := c.ApplyContext(kinds, &abiv1.NodeSync{Objects: []*abiv1.ContextObject{quota("a", "q", "1")}, TenantUsage: []*abiv1.TenantUsage{usage("", "a", 1, 1)}}); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyContext(kinds, &abiv1.NodeSync{Objects: []*abiv1.ContextObject{quota("a", "r", "1")}}); err != nil {
		t.Fatal(err)
	}
	if got := names(c.Objects(kindQuota)); got != "a/q@1 a/r@1" || c.TenantUsage("", "a").GetPods() != 1 {
		t.Errorf("quotas %q, usage %v", got, c.TenantUsage("", "a"))
	}
	if err := c.ApplyContext(slices.Clone(kinds[:1]), &abiv1.NodeSync{}); err == nil {
		t.Error("ApplyContext with other kinds passed")
	}
	if err := c.ApplyContext(kinds, &abiv1.NodeSync{ObjectsReset: []int32{2}}); err == nil || !strings.Contains(err.Error(), "index 2 out of range") {
		t.Errorf("ApplyContext with a bad index: %v", err)
	}
	if err := (&Cycle{in: inst}).ApplyContext(kinds, &abiv1.NodeSync{}); err == nil {
		t.Error("ApplyContext on the SDK's own instance passed")
	}
}
