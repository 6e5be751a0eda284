package guest

import (
	"strings"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// The objects as the host sends them: typed objects of k8s.io/api
// marshalled with encoding/json (no apiVersion and kind), field names as
// in k8s.io/api/resource/v1.
const (
	sliceJSON = `{"metadata":{"name":"node-1-gpu","uid":"u1","resourceVersion":"7","creationTimestamp":null},
"spec":{"driver":"gpu.example.com","pool":{"name":"node-1","generation":1,"resourceSliceCount":1},"nodeName":"node-1",
"devices":[
 {"name":"gpu-0","attributes":{"model":{"string":"a100"},"gpu.example.com/index":{"int":0},"dra.net/numa":{"int":1},
  "driverVersion":{"version":"1.2.3"},"shared":{"bool":true}},
  "capacity":{"memory":{"value":"40Gi"},"gpu.example.com/cores":{"value":"6912"},"dra.net/power":{"value":"250"}}},
 {"name":"gpu-1","attributes":{"model":{"string":"h100"}},"capacity":{"memory":{"value":"80Gi"}}}]}}`
	clusterSliceJSON = `{"metadata":{"name":"fabric"},"spec":{"driver":"net.example.com","pool":{"name":"fabric"},"allNodes":true}}`
	claimJSON        = `{"metadata":{"name":"train","namespace":"ml"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu"}}]}},
"status":{"allocation":{"devices":{"results":[
 {"request":"gpu","driver":"gpu.example.com","pool":"node-1","device":"gpu-0"},
 {"request":"gpu/big","driver":"gpu.example.com","pool":"node-1","device":"gpu-1","adminAccess":false}]},
 "nodeSelector":{"nodeSelectorTerms":[]}},
"reservedFor":[{"resource":"pods","name":"train-0","uid":"p0"},{"resource":"pods","name":"train-1","uid":"p1"}]}}`
	pendingClaimJSON = `{"metadata":{"name":"wait","namespace":"ml"},"spec":{"devices":{"requests":[]}},"status":{}}`
	classJSON        = `{"metadata":{"name":"gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == \"gpu.example.com\""}},
 {"cel":{"expression":"device.attributes[\"gpu.example.com\"].model == 'a100'"}}]}}`
	priorityJSON = `{"metadata":{"name":"high"},"value":1000000,"globalDefault":true,"description":"d"}`
	neverJSON    = `{"metadata":{"name":"batch"},"value":-5,"preemptionPolicy":"Never"}`
)

func builtinCycle(t *testing.T) *Cycle {
	t.Helper()
	kinds := []Kind{KindNamespace, KindPriorityClass, KindResourceSlice, KindResourceClaim, KindDeviceClass}
	obj := func(k int32, ns, name, js string, labels ...*abiv1.KeyValue) *abiv1.ContextObject {
		return &abiv1.ContextObject{Kind: k, Namespace: ns, Name: name, Json: []byte(js), Labels: labels}
	}
	c := NewCycle(nil, nil)
	err := c.ApplyContext(kinds, &abiv1.NodeSync{Objects: []*abiv1.ContextObject{
		obj(0, "", "ml", `{"metadata":{"name":"ml","labels":{"tenant":"blue"}}}`, &abiv1.KeyValue{Key: "tenant", Value: "blue"}),
		obj(1, "", "high", priorityJSON), obj(1, "", "batch", neverJSON),
		obj(2, "", "node-1-gpu", sliceJSON), obj(2, "", "fabric", clusterSliceJSON),
		obj(3, "ml", "train", claimJSON), obj(3, "ml", "wait", pendingClaimJSON),
		obj(4, "", "gpu", classJSON),
	}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTypedViews(t *testing.T) {
	c := builtinCycle(t)
	ns := c.Namespace("ml")
	if v, ok := ns.Label("tenant"); ns.Name() != "ml" || v != "blue" || !ok || len(ns.Labels()) != 1 || ns.Object().Kind() != KindNamespace {
		t.Errorf("namespace %q: tenant %q, %v", ns.Name(), v, ok)
	}
	if c.Namespace("other") != nil || c.PriorityClass("other") != nil || c.ResourceClaim("default", "train") != nil || c.DeviceClass("x") != nil {
		t.Error("an absent object found")
	}

	high, batch := c.PriorityClass("high"), c.PriorityClass("batch")
	if high.Name() != "high" || high.Value() != 1000000 || !high.GlobalDefault() || high.PreemptionPolicy() != "PreemptLowerPriority" {
		t.Errorf("high: %d %v %s", high.Value(), high.GlobalDefault(), high.PreemptionPolicy())
	}
	if batch.Value() != -5 || batch.GlobalDefault() || batch.PreemptionPolicy() != "Never" {
		t.Errorf("batch: %d %v %s", batch.Value(), batch.GlobalDefault(), batch.PreemptionPolicy())
	}

	slices := c.ResourceSlices()
	if len(slices) != 2 || slices[0].Name() != "fabric" || slices[1].Name() != "node-1-gpu" {
		t.Fatalf("slices %v", slices)
	}
	fabric, s := slices[0], slices[1]
	if !fabric.AllNodes() || fabric.NodeName() != "" || fabric.Driver() != "net.example.com" || len(fabric.Devices()) != 0 {
		t.Errorf("fabric: all nodes %v, node %q, driver %q", fabric.AllNodes(), fabric.NodeName(), fabric.Driver())
	}
	if s.Driver() != "gpu.example.com" || s.Pool() != "node-1" || s.NodeName() != "node-1" || s.AllNodes() {
		t.Errorf("slice: driver %q pool %q node %q", s.Driver(), s.Pool(), s.NodeName())
	}
	devs := s.Devices()
	if len(devs) != 2 || devs[0].Name() != "gpu-0" || devs[1].Name() != "gpu-1" {
		t.Fatalf("devices %v", devs)
	}
	d := devs[0]
	str := func(v Value) string { s, _ := v.String(); return s }
	num := func(v Value) int64 { i, _ := v.Int(); return i }
	if got := str(d.Attribute("model")); got != "a100" || str(d.Attribute("gpu.example.com/model")) != "a100" {
		t.Errorf("model %q, qualified %q", got, str(d.Attribute("gpu.example.com/model")))
	}
	if num(d.Attribute("index")) != 0 || !d.Attribute("index").Exists() || !d.Attribute("gpu.example.com/index").Exists() {
		t.Error("index, stored qualified, not found")
	}
	if num(d.Attribute("dra.net/numa")) != 1 || d.Attribute("numa").Exists() {
		t.Error("an attribute of another domain is found only by its qualified name")
	}
	if str(d.Attribute("driverVersion")) != "1.2.3" {
		t.Errorf("version %q", str(d.Attribute("driverVersion")))
	}
	if b, _ := d.Attribute("shared").Bool(); !b {
		t.Error("bool attribute")
	}
	if d.Attribute("absent").Exists() || d.Attribute("other.example.com/model").Exists() {
		t.Error("an absent attribute exists")
	}
	for _, tc := range []struct {
		name, resource string
		want           int64
		ok             bool
	}{
		{"memory", ResourceMemory, 40 << 30, true}, {"gpu.example.com/memory", ResourceMemory, 40 << 30, true},
		{"cores", "cores", 6912, true}, {"dra.net/power", "power", 250, true}, {"power", "power", 0, false},
		{"absent", "x", 0, false},
	} {
		if got, ok := d.Capacity(tc.name, tc.resource); got != tc.want || ok != tc.ok {
			t.Errorf("Capacity(%q) = %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if got, _ := devs[1].Capacity("memory", ResourceMemory); got != 80<<30 || str(devs[1].Value().Get("name")) != "gpu-1" {
		t.Errorf("gpu-1 memory %d", got)
	}

	claim := c.ResourceClaim("ml", "train")
	if claim.Namespace() != "ml" || claim.Name() != "train" || !claim.Allocated() || claim.ReservedFor() != 2 {
		t.Errorf("claim: allocated %v, reserved for %d", claim.Allocated(), claim.ReservedFor())
	}
	want := []AllocatedDevice{{"gpu", "gpu.example.com", "node-1", "gpu-0"}, {"gpu/big", "gpu.example.com", "node-1", "gpu-1"}}
	if got := claim.Devices(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("allocated devices %v", got)
	}
	wait := c.ResourceClaim("ml", "wait")
	if wait.Allocated() || len(wait.Devices()) != 0 || wait.ReservedFor() != 0 {
		t.Errorf("pending claim: allocated %v, devices %v", wait.Allocated(), wait.Devices())
	}

	class := c.DeviceClass("gpu")
	sel := class.Selectors()
	if class.Name() != "gpu" || len(sel) != 2 || sel[0] != `device.driver == "gpu.example.com"` || !strings.Contains(sel[1], "'a100'") {
		t.Errorf("selectors %q", sel)
	}
}

func TestTypedViewOfUndeclaredKind(t *testing.T) {
	c := NewCycle(nil, nil)
	if err := c.ApplyContext([]Kind{KindNamespace}, &abiv1.NodeSync{}); err != nil {
		t.Fatal(err)
	}
	if c.Namespace("x") != nil {
		t.Error("a namespace out of nothing")
	}
	defer func() {
		if r, _ := recover().(string); !strings.Contains(r, "resource.k8s.io/v1/resourceslices") {
			t.Errorf("recovered %q", r)
		}
	}()
	c.ResourceSlices()
	t.Error("no panic")
}
