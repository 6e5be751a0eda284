package guest

import abiv1 "github.com/wasmsched/wasmsched/abi/v1"

// Typed views of the built-in kinds a policy may read. Each reads an
// Object of its kind, which Object gives for fields without a method, and
// is read-only like it. A view's kind must be one of the policy's
// Policy.Context: reading another kind panics, naming it. A missing object
// is a nil view, whose methods answer zero values, as a nil Object's do.

// Namespace is a namespace (v1/namespaces, KindNamespace).
type Namespace struct{ o *Object }

// Namespace returns the namespace of that name, or nil.
func (c *Cycle) Namespace(name string) *Namespace {
	if o := c.Object(KindNamespace, "", name); o != nil {
		return &Namespace{o}
	}
	return nil
}

// Object returns the namespace as an Object, for fields without a method.
func (n *Namespace) Object() *Object { return n.obj() }

// Name returns the namespace's name.
func (n *Namespace) Name() string { return n.obj().Name() }

// Label returns the value of a label of the namespace and whether it is
// set: tenants spanning namespaces are often namespace labels.
func (n *Namespace) Label(key string) (string, bool) { return n.obj().Label(key) }

// Labels returns the namespace's labels, sorted by key.
func (n *Namespace) Labels() []*abiv1.KeyValue { return n.obj().Labels() }

// PriorityClass is a priority class (scheduling.k8s.io/v1/priorityclasses,
// KindPriorityClass).
type PriorityClass struct{ o *Object }

// PriorityClass returns the priority class of that name, or nil.
func (c *Cycle) PriorityClass(name string) *PriorityClass {
	if o := c.Object(KindPriorityClass, "", name); o != nil {
		return &PriorityClass{o}
	}
	return nil
}

// Object returns the priority class as an Object.
func (p *PriorityClass) Object() *Object { return p.obj() }

// Name returns the priority class's name.
func (p *PriorityClass) Name() string { return p.obj().Name() }

// Value returns the priority of the pods of this class.
func (p *PriorityClass) Value() int32 {
	v, _ := p.obj().Get("value").Int()
	return int32(v)
}

// GlobalDefault reports whether the class is the default of pods that
// name none.
func (p *PriorityClass) GlobalDefault() bool {
	v, _ := p.obj().Get("globalDefault").Bool()
	return v
}

// PreemptionPolicy returns "PreemptLowerPriority" or "Never";
// "PreemptLowerPriority" when the object does not say, as the API server
// defaults it.
func (p *PriorityClass) PreemptionPolicy() string {
	if v, ok := p.obj().Get("preemptionPolicy").String(); ok && v != "" {
		return v
	}
	return "PreemptLowerPriority"
}

// ResourceSlice is a DRA resource slice (resource.k8s.io/v1/resourceslices,
// KindResourceSlice): devices of one driver's pool, published for one node
// or for several.
type ResourceSlice struct{ o *Object }

// ResourceSlices returns the resident resource slices, sorted by name.
func (c *Cycle) ResourceSlices() []*ResourceSlice {
	objs := c.Objects(KindResourceSlice)
	out := make([]*ResourceSlice, len(objs))
	for i, o := range objs {
		out[i] = &ResourceSlice{o}
	}
	return out
}

// Object returns the resource slice as an Object.
func (s *ResourceSlice) Object() *Object { return s.obj() }

// Name returns the resource slice's name.
func (s *ResourceSlice) Name() string { return s.obj().Name() }

// Driver returns the name of the driver that publishes the slice
// (spec.driver).
func (s *ResourceSlice) Driver() string { return s.str("spec", "driver") }

// Pool returns the name of the slice's pool (spec.pool.name).
func (s *ResourceSlice) Pool() string { return s.str("spec", "pool", "name") }

// NodeName returns the node whose devices the slice lists (spec.nodeName),
// empty when the slice is for several nodes (AllNodes, a node selector,
// or per-device node selection).
func (s *ResourceSlice) NodeName() string { return s.str("spec", "nodeName") }

// AllNodes reports whether the slice's devices are reachable from every
// node (spec.allNodes).
func (s *ResourceSlice) AllNodes() bool {
	v, _ := s.obj().Get("spec", "allNodes").Bool()
	return v
}

// Devices returns the devices of the slice (spec.devices), in its order.
func (s *ResourceSlice) Devices() []Device {
	list := s.obj().Get("spec", "devices")
	out := make([]Device, 0, list.Len())
	driver := s.Driver()
	list.Each(func(_ string, d Value) bool {
		out = append(out, Device{v: d, driver: driver})
		return true
	})
	return out
}

func (s *ResourceSlice) str(path ...string) string {
	v, _ := s.obj().Get(path...).String()
	return v
}

// Device is one device of a ResourceSlice.
type Device struct {
	v      Value
	driver string
}

// Value returns the device as it appears in the slice, for fields without
// a method (nodeName, taints, consumesCounters, ...).
func (d Device) Value() Value { return d.v }

// Name returns the device's name, unique within its pool.
func (d Device) Name() string {
	v, _ := d.v.Get("name").String()
	return v
}

// Attribute returns the value of a device attribute: the string, int,
// bool or version it holds (a list for the list forms), missing when the
// device has no such attribute. A name in the driver's own domain may be
// given with or without it: for driver gpu.example.com, "model" and
// "gpu.example.com/model" are the same attribute, as DRA defines.
func (d Device) Attribute(name string) Value {
	a := d.qualified("attributes", name)
	var inner Value
	a.Each(func(_ string, v Value) bool {
		inner = v
		return false
	})
	return inner
}

// Capacity returns a capacity of the device as an amount of the named
// resource (see ParseQuantity: milli for "cpu", the integer value
// otherwise), and false when the device has no such capacity. Names are
// qualified as for Attribute.
func (d Device) Capacity(name, resource string) (int64, bool) {
	return d.qualified("capacity", name).Get("value").Quantity(resource)
}

// qualified returns the member of the device's attributes or capacity
// named name, with or without the driver's domain.
func (d Device) qualified(field, name string) Value {
	m := d.v.Get(field)
	if v := m.Get(name); v.Exists() {
		return v
	}
	if prefix := d.driver + "/"; len(name) > len(prefix) && name[:len(prefix)] == prefix {
		return m.Get(name[len(prefix):])
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			return Value{}
		}
	}
	return m.Get(d.driver + "/" + name)
}

// ResourceClaim is a DRA resource claim (resource.k8s.io/v1/resourceclaims,
// KindResourceClaim).
type ResourceClaim struct{ o *Object }

// ResourceClaim returns the resource claim of that namespace and name, or
// nil.
func (c *Cycle) ResourceClaim(namespace, name string) *ResourceClaim {
	if o := c.Object(KindResourceClaim, namespace, name); o != nil {
		return &ResourceClaim{o}
	}
	return nil
}

// Object returns the resource claim as an Object.
func (r *ResourceClaim) Object() *Object { return r.obj() }

// Namespace returns the claim's namespace.
func (r *ResourceClaim) Namespace() string { return r.obj().Namespace() }

// Name returns the claim's name.
func (r *ResourceClaim) Name() string { return r.obj().Name() }

// Allocated reports whether devices are allocated to the claim
// (status.allocation is set).
func (r *ResourceClaim) Allocated() bool {
	a := r.obj().Get("status", "allocation")
	return a.Exists() && !a.IsNull()
}

// AllocatedDevice is one device allocated to a claim
// (status.allocation.devices.results).
type AllocatedDevice struct {
	// Request names the claim's request the device satisfies
	// ("<request>/<subrequest>" for a request with alternatives).
	Request string
	// Driver, Pool and Device name the device in its ResourceSlice.
	Driver, Pool, Device string
}

// Devices returns the devices allocated to the claim, in the order of its
// status; none when it is not allocated.
func (r *ResourceClaim) Devices() []AllocatedDevice {
	results := r.obj().Get("status", "allocation", "devices", "results")
	out := make([]AllocatedDevice, 0, results.Len())
	results.Each(func(_ string, d Value) bool {
		s := func(f string) string {
			v, _ := d.Get(f).String()
			return v
		}
		out = append(out, AllocatedDevice{Request: s("request"), Driver: s("driver"), Pool: s("pool"), Device: s("device")})
		return true
	})
	return out
}

// ReservedFor returns the number of consumers (pods) the claim is
// reserved for (status.reservedFor).
func (r *ResourceClaim) ReservedFor() int { return r.obj().Get("status", "reservedFor").Len() }

// DeviceClass is a DRA device class (resource.k8s.io/v1/deviceclasses,
// KindDeviceClass).
type DeviceClass struct{ o *Object }

// DeviceClass returns the device class of that name, or nil.
func (c *Cycle) DeviceClass(name string) *DeviceClass {
	if o := c.Object(KindDeviceClass, "", name); o != nil {
		return &DeviceClass{o}
	}
	return nil
}

// Object returns the device class as an Object.
func (d *DeviceClass) Object() *Object { return d.obj() }

// Name returns the device class's name.
func (d *DeviceClass) Name() string { return d.obj().Name() }

// Selectors returns the CEL expressions of the class's selectors
// (spec.selectors[].cel.expression), in order. The SDK does not evaluate
// CEL.
func (d *DeviceClass) Selectors() []string {
	var out []string
	d.obj().Get("spec", "selectors").Each(func(_ string, s Value) bool {
		if e, ok := s.Get("cel", "expression").String(); ok {
			out = append(out, e)
		}
		return true
	})
	return out
}

// obj is the Namespace's object; nil for a nil Namespace, whose methods then
// answer zero values.
func (n *Namespace) obj() *Object {
	if n == nil {
		return nil
	}
	return n.o
}

// obj is the PriorityClass's object; nil for a nil PriorityClass, whose methods then
// answer zero values.
func (p *PriorityClass) obj() *Object {
	if p == nil {
		return nil
	}
	return p.o
}

// obj is the ResourceSlice's object; nil for a nil ResourceSlice, whose methods then
// answer zero values.
func (s *ResourceSlice) obj() *Object {
	if s == nil {
		return nil
	}
	return s.o
}

// obj is the ResourceClaim's object; nil for a nil ResourceClaim, whose methods then
// answer zero values.
func (r *ResourceClaim) obj() *Object {
	if r == nil {
		return nil
	}
	return r.o
}

// obj is the DeviceClass's object; nil for a nil DeviceClass, whose methods then
// answer zero values.
func (d *DeviceClass) obj() *Object {
	if d == nil {
		return nil
	}
	return d.o
}
