package guest

import (
	"slices"
	"strings"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// Object is a cluster object of a kind the policy declares in
// Policy.Context, resident in the instance as nodes are: the host sends it
// when it changes, never per cycle. Its metadata is read through methods,
// everything else through Get, which parses the object's JSON on first use
// and keeps the parse. It is read-only, and is read from one goroutine at a
// time (the SDK runs a policy in one): the first Get writes the parse.
//
// A newer version of the object replaces it in the instance; an Object a
// policy holds keeps the version it had.
//
// A missing object is nil (Cycle.Object, the typed views' getters), and
// every method of a nil Object, and of a nil typed view (Namespace,
// PriorityClass, ResourceSlice, ResourceClaim, DeviceClass), answers as an
// empty object would: "", false, 0, no labels, a Value that does not exist.
// A policy may read a view without checking it first, and checks for nil
// only where a missing object means something of its own.
type Object struct {
	kind Kind
	msg  *abiv1.ContextObject
	doc  *document // nil until the first Get
}

// Kind returns the object's kind, as the policy declared it.
func (o *Object) Kind() Kind {
	if o == nil {
		return Kind{}
	}
	return o.kind
}

// Namespace returns the object's namespace, empty for cluster-scoped kinds.
func (o *Object) Namespace() string { return o.message().GetNamespace() }

// Name returns the object's name.
func (o *Object) Name() string { return o.message().GetName() }

// UID returns the object's UID.
func (o *Object) UID() string { return o.message().GetUid() }

// ResourceVersion returns the object's resource version: it changes with
// every change of the object, so a policy may keep what it computed from
// one version.
func (o *Object) ResourceVersion() string { return o.message().GetResourceVersion() }

// Label returns the value of a label and whether it is set.
func (o *Object) Label(key string) (string, bool) { return Lookup(o.message().GetLabels(), key) }

// Labels returns the object's labels, sorted by key (for MatchSelector).
func (o *Object) Labels() []*abiv1.KeyValue { return o.message().GetLabels() }

// JSON returns the whole object as JSON, as the host sent it: typed
// built-in objects without apiVersion and kind, custom resources as they
// are, metadata.managedFields left out. It is read-only.
func (o *Object) JSON() []byte { return o.message().GetJson() }

// Get returns the value at path inside the object: Get("spec", "min",
// "cpu"); Get() is the whole object. A missing member, a path through
// something else than an object, or an object whose JSON is malformed gives
// a Value whose Exists is false.
func (o *Object) Get(path ...string) Value {
	if o == nil {
		return Value{}
	}
	if o.doc == nil {
		o.doc = parseDocument(o.msg.GetJson())
	}
	return o.doc.root().Get(path...)
}

// message is the object's message; nil for a nil Object, whose getters
// then answer zero values (a missing object reads as an empty one: see
// Object).
func (o *Object) message() *abiv1.ContextObject {
	if o == nil {
		return nil
	}
	return o.msg
}

// objectKey identifies an object within its kind.
type objectKey struct{ namespace, name string }

// kindObjects holds the resident objects of one declared kind.
type kindObjects struct {
	byKey map[objectKey]*Object
	// sorted is byKey's objects by namespace and name, rebuilt on the first
	// read after a change (stale).
	sorted []*Object
	stale  bool
}

// tenantUsage holds the resident usage of the tenants of one key.
type tenantUsage struct {
	byTenant map[string]*abiv1.Resources
	sorted   []string // tenant names, rebuilt on the first read after a change
	stale    bool
}

// clusterState is an instance's cluster objects and tenant usage, as the host
// syncs them (NodeSync fields 4-7).
type clusterState struct {
	// kinds are the policy's Policy.Context as declared at init; a
	// ContextObject's kind indexes them, and objects.
	kinds   []Kind
	objects []kindObjects
	usage   map[string]*tenantUsage // by key; "" is namespaces
}

// checkKinds validates the kind indexes of a sync before anything of it is
// applied, so that a sync the SDK refuses changes nothing.
func (x *clusterState) checkKinds(m *abiv1.NodeSync) error {
	check := func(k int32) error {
		if k < 0 || int(k) >= len(x.kinds) {
			return errorString("context object kind index " + itoa(int64(k)) + " out of range: the policy declares " + itoa(int64(len(x.kinds))) + " kinds")
		}
		return nil
	}
	for _, k := range m.GetObjectsReset() {
		if err := check(k); err != nil {
			return err
		}
	}
	for _, o := range m.GetObjects() {
		if err := check(o.GetKind()); err != nil {
			return err
		}
	}
	for _, r := range m.GetObjectsRemoved() {
		if err := check(r.GetKind()); err != nil {
			return err
		}
	}
	return nil
}

// apply applies NodeSync fields 4-7, in the order the ABI gives: resets,
// upserts, removals, tenant usage. checkKinds must have passed.
func (x *clusterState) apply(m *abiv1.NodeSync) {
	if len(x.objects) < len(x.kinds) {
		x.objects = append(x.objects, make([]kindObjects, len(x.kinds)-len(x.objects))...)
	}
	for _, k := range m.GetObjectsReset() {
		x.objects[k] = kindObjects{}
	}
	for _, o := range m.GetObjects() {
		ko := &x.objects[o.GetKind()]
		if ko.byKey == nil {
			ko.byKey = map[objectKey]*Object{}
		}
		ko.byKey[objectKey{o.GetNamespace(), o.GetName()}] = &Object{kind: x.kinds[o.GetKind()], msg: o}
		ko.stale = true
	}
	for _, r := range m.GetObjectsRemoved() {
		ko := &x.objects[r.GetKind()]
		key := objectKey{r.GetNamespace(), r.GetName()}
		if _, ok := ko.byKey[key]; ok {
			delete(ko.byKey, key)
			ko.stale = true
		}
	}
	for _, u := range m.GetTenantUsage() {
		tu := x.usage[u.GetKey()]
		if u.GetRequested().GetPods() == 0 {
			if tu != nil {
				if _, ok := tu.byTenant[u.GetTenant()]; ok {
					delete(tu.byTenant, u.GetTenant())
					tu.stale = true
				}
			}
			continue
		}
		if tu == nil {
			if x.usage == nil {
				x.usage = map[string]*tenantUsage{}
			}
			tu = &tenantUsage{byTenant: map[string]*abiv1.Resources{}}
			x.usage[u.GetKey()] = tu
		}
		if _, ok := tu.byTenant[u.GetTenant()]; !ok {
			tu.stale = true
		}
		tu.byTenant[u.GetTenant()] = u.GetRequested()
	}
}

// kindIndex returns the index of k among the declared kinds. Reading a kind
// the policy did not declare is a bug in the policy, which its first test
// should show: it panics, naming the kind.
func (x *clusterState) kindIndex(k Kind) int {
	for i, d := range x.kinds {
		if d == k {
			return i
		}
	}
	panic("guest: the policy reads " + k.String() + " but does not declare it in Policy.Context")
}

func (x *clusterState) list(k Kind) []*Object {
	i := x.kindIndex(k)
	if i >= len(x.objects) {
		return nil
	}
	ko := &x.objects[i]
	if ko.stale {
		// A new slice: a policy may hold the previous one.
		ko.sorted = make([]*Object, 0, len(ko.byKey))
		for _, o := range ko.byKey {
			ko.sorted = append(ko.sorted, o)
		}
		slices.SortFunc(ko.sorted, func(a, b *Object) int {
			if c := strings.Compare(a.Namespace(), b.Namespace()); c != 0 {
				return c
			}
			return strings.Compare(a.Name(), b.Name())
		})
		ko.stale = false
	}
	return ko.sorted
}

func (x *clusterState) object(k Kind, namespace, name string) *Object {
	i := x.kindIndex(k)
	if i >= len(x.objects) {
		return nil
	}
	return x.objects[i].byKey[objectKey{namespace, name}]
}

func (x *clusterState) tenants(key string) *tenantUsage {
	tu := x.usage[key]
	if tu != nil && tu.stale {
		tu.sorted = make([]string, 0, len(tu.byTenant))
		for t := range tu.byTenant {
			tu.sorted = append(tu.sorted, t)
		}
		slices.Sort(tu.sorted)
		tu.stale = false
	}
	return tu
}

// Objects returns the resident objects of kind k, sorted by namespace and
// name. The slice is shared and read-only. k must be one of the policy's
// Policy.Context: reading another kind panics.
func (c *Cycle) Objects(k Kind) []*Object { return c.cluster().list(k) }

// Object returns the resident object of kind k with that namespace (empty
// for cluster-scoped kinds) and name, or nil. k must be one of the
// policy's Policy.Context: reading another kind panics.
func (c *Cycle) Object(k Kind, namespace, name string) *Object {
	return c.cluster().object(k, namespace, name)
}

// TenantUsage returns what the pods of a tenant request: with an empty
// key the tenant is a namespace, otherwise a value of the pod label key,
// one of Policy.UsageLabelKeys. Requested pods are its number of pods. It
// counts pods bound or assumed by the scheduler and leaves terminated ones
// out; nil means none (or usage the policy did not ask for). The Resources
// are read-only.
func (c *Cycle) TenantUsage(key, tenant string) *abiv1.Resources {
	if tu := c.cluster().usage[key]; tu != nil {
		return tu.byTenant[tenant]
	}
	return nil
}

// EachTenant calls fn for every tenant of key with pods (see TenantUsage),
// sorted by tenant, until fn returns false.
func (c *Cycle) EachTenant(key string, fn func(tenant string, used *abiv1.Resources) bool) {
	tu := c.cluster().tenants(key)
	if tu == nil {
		return
	}
	for _, t := range tu.sorted {
		if !fn(t, tu.byTenant[t]) {
			return
		}
	}
}

// ApplyContext gives a cycle made by NewCycle cluster objects and tenant
// usage: those of m's fields objects_reset, objects, objects_removed and
// tenant_usage (its node fields are ignored), applied exactly as the SDK
// applies the host's syncs, with kinds as the policy's Policy.Context,
// which ContextObject.kind indexes. Calling it again applies further
// changes, as the host's next sync would; kinds must not change. It is for
// native tests (guesttest.MakeCluster builds m), and returns an error for
// what the SDK refuses, and for a cycle the SDK made.
func (c *Cycle) ApplyContext(kinds []Kind, m *abiv1.NodeSync) error {
	if c.in == nil {
		c.in = &instance{}
	}
	if c.in == inst {
		return errorString("ApplyContext is for cycles made by NewCycle, not the SDK's")
	}
	x := &c.in.cluster
	if x.kinds == nil {
		x.kinds = append([]Kind{}, kinds...)
	} else if !slices.Equal(x.kinds, kinds) {
		return errorString("ApplyContext: the kinds differ from those of the first call")
	}
	if err := x.checkKinds(m); err != nil {
		return err
	}
	x.apply(m)
	return nil
}

// cluster returns the cluster objects the cycle reads; a Cycle literal has
// none and declares no kind.
func (c *Cycle) cluster() *clusterState {
	if c.in == nil {
		return &clusterState{}
	}
	return &c.in.cluster
}
