package guest

import "testing"

// A missing object is a nil view, and every view answers zero values
// rather than panicking: the documented snippet `ns := c.Namespace(...)`
// then `ns.Label(...)` is safe when the namespace is not there.
func TestNilViewsAnswerZeroValues(t *testing.T) {
	var o *Object
	if o.Kind() != (Kind{}) || o.Namespace() != "" || o.Name() != "" || o.UID() != "" || o.ResourceVersion() != "" ||
		o.Labels() != nil || o.JSON() != nil || o.Get("spec").Exists() {
		t.Error("a nil Object answers something")
	}
	if v, ok := o.Label("team"); v != "" || ok {
		t.Errorf("nil Object Label: %q %v", v, ok)
	}
	var ns *Namespace
	if v, ok := ns.Label("team"); v != "" || ok || ns.Name() != "" || ns.Labels() != nil || ns.Object() != nil {
		t.Error("a nil Namespace answers something")
	}
	var pc *PriorityClass
	if pc.Name() != "" || pc.Value() != 0 || pc.GlobalDefault() || pc.PreemptionPolicy() != "PreemptLowerPriority" || pc.Object() != nil {
		t.Errorf("a nil PriorityClass answers something (preemption policy %q: the API server's default)", pc.PreemptionPolicy())
	}
	var rs *ResourceSlice
	if rs.Name() != "" || rs.Driver() != "" || rs.Pool() != "" || rs.NodeName() != "" || rs.AllNodes() || len(rs.Devices()) != 0 || rs.Object() != nil {
		t.Error("a nil ResourceSlice answers something")
	}
	var rc *ResourceClaim
	if rc.Namespace() != "" || rc.Name() != "" || rc.Allocated() || len(rc.Devices()) != 0 || rc.ReservedFor() != 0 || rc.Object() != nil {
		t.Error("a nil ResourceClaim answers something")
	}
	var dc *DeviceClass
	if dc.Name() != "" || len(dc.Selectors()) != 0 || dc.Object() != nil {
		t.Error("a nil DeviceClass answers something")
	}
}
