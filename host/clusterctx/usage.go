package clusterctx

import (
	"slices"
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/convert"
)

// Usage is the resources requested per tenant: per namespace (key "") and
// per value of each watched pod label key. A pod counts while it is bound
// (the informer saw spec.nodeName set) or assumed (Reserve, before the
// binding is seen), and is neither terminated (Succeeded, Failed) nor being
// deleted. Counting is by pod UID, so every event may repeat: Set, Assume
// and Forget are idempotent and a pod is never counted twice. A pod's
// requests are its effective requests as the scheduler computes them
// (convert.PodRequests).
//
// Tenants have a change log like a Store's: an instance is sent only the
// tenants whose usage changed since its last sync, each once. A tenant left
// with no pods is sent with requested.pods == 0, which removes it.
//
// Usage is safe for concurrent use: informer handlers and the scheduler's
// Reserve and Unreserve write while any number of instances read.
type Usage struct {
	mu      sync.RWMutex
	pods    map[types.UID]*podRecord
	keys    []string // watched label keys, sorted
	tenants map[tenantKey]*tenant
	log     []tenantRecord
	seq     uint64

	// onRelease are called, outside the lock, after a pod stopped
	// counting (deleted, terminated, unreserved).
	listeners sync.Mutex
	onRelease []func()
}

// OnRelease calls fn, on the goroutine that recorded it, after any pod
// stops counting in the usage: what a policy refused for want of quota may
// fit now. fn must be quick.
func (u *Usage) OnRelease(fn func()) {
	u.listeners.Lock()
	defer u.listeners.Unlock()
	u.onRelease = append(u.onRelease, fn)
}

func (u *Usage) released() {
	u.listeners.Lock()
	fns := u.onRelease
	u.listeners.Unlock()
	for _, fn := range fns {
		fn()
	}
}

type podRecord struct {
	namespace string
	labels    map[string]string
	requests  *abiv1.Resources
	bound     bool // the informer saw it bound, not terminated
	assumed   bool
	counted   bool // its requests are in its tenants' sums
}

type tenantKey struct{ key, tenant string }

type tenant struct {
	key      tenantKey
	seq      uint64
	milliCPU int64
	memory   int64
	storage  int64
	pods     int64
	scalars  map[string]int64
	// entry is the encoded TenantUsage entry at seq; nil until needed.
	entry []byte
}

type tenantRecord struct {
	seq uint64
	t   *tenant
}

// NewUsage returns an empty Usage counting namespaces only.
func NewUsage() *Usage {
	return &Usage{pods: map[types.UID]*podRecord{}, tenants: map[tenantKey]*tenant{}}
}

// WatchKey starts counting per value of the pod label key; the pods already
// known are counted at once. Watching a key twice is harmless.
func (u *Usage) WatchKey(key string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if key == "" || slices.Contains(u.keys, key) {
		return
	}
	u.keys = append(u.keys, key)
	sort.Strings(u.keys)
	// In UID order, so that the tenants' change log (and what instances
	// are sent) does not depend on map order.
	uids := make([]types.UID, 0, len(u.pods))
	for uid := range u.pods {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	for _, uid := range uids {
		if p := u.pods[uid]; p.counted {
			if v, ok := p.labels[key]; ok {
				u.add(tenantKey{key, v}, p.requests, 1)
			}
		}
	}
}

// Keys returns the watched label keys, sorted.
func (u *Usage) Keys() []string {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return slices.Clone(u.keys)
}

// Set records a pod as the informer sees it (add or update): counted iff
// bound and not terminated or being deleted, or assumed and not terminated.
func (u *Usage) Set(pod *v1.Pod) {
	u.update(pod, func(p *podRecord, over bool) {
		p.bound = !over && pod.Spec.NodeName != ""
		if over {
			p.assumed = false
		}
	})
}

// Assume counts a pod the scheduler reserved a node for (Reserve), as if
// bound.
func (u *Usage) Assume(pod *v1.Pod) {
	u.update(pod, func(p *podRecord, over bool) { p.assumed = !over })
}

// Forget undoes Assume (Unreserve): the pod stays counted only if the
// informer saw it bound.
func (u *Usage) Forget(pod *v1.Pod) {
	u.mu.Lock()
	released := false
	if p := u.pods[pod.UID]; p != nil {
		p.assumed = false
		released = u.recount(pod.UID, p, p.requests, p.labels)
	}
	u.mu.Unlock()
	if released {
		u.released()
	}
}

// Delete forgets a pod (informer delete).
func (u *Usage) Delete(pod *v1.Pod) {
	u.mu.Lock()
	released := false
	if p := u.pods[pod.UID]; p != nil {
		p.bound, p.assumed = false, false
		released = u.recount(pod.UID, p, p.requests, p.labels)
	}
	u.mu.Unlock()
	if released {
		u.released()
	}
}

// Handler returns the pod informer's event handler: adds and updates Set,
// deletes (including a DeletedFinalStateUnknown) Delete.
func (u *Usage) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*v1.Pod); ok {
				u.Set(p)
			}
		},
		UpdateFunc: func(_, obj any) {
			if p, ok := obj.(*v1.Pod); ok {
				u.Set(p)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*v1.Pod); ok {
				u.Delete(p)
			}
		},
	}
}

// terminated reports whether a pod no longer holds its resources: it ran to
// completion or failed, or is being deleted.
func terminated(pod *v1.Pod) bool {
	return pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// update applies change to pod's record (creating it), with the pod's
// current requests and labels, and recounts it.
func (u *Usage) update(pod *v1.Pod, change func(p *podRecord, over bool)) {
	reqs := convert.PodRequests(pod)
	u.mu.Lock()
	p := u.pods[pod.UID]
	if p == nil {
		p = &podRecord{namespace: pod.Namespace}
		u.pods[pod.UID] = p
	}
	change(p, terminated(pod))
	released := u.recount(pod.UID, p, reqs, pod.Labels)
	u.mu.Unlock()
	if released {
		u.released()
	}
}

// recount moves p's contribution from what it was to what it is now, with
// requests reqs and labels: removed while counted with the old requests and
// labels, added back with the new. A record counting nothing is dropped.
// It reports whether the pod stopped counting. u.mu is held.
func (u *Usage) recount(uid types.UID, p *podRecord, reqs *abiv1.Resources, labels map[string]string) (released bool) {
	counted := p.bound || p.assumed
	if p.counted && (!counted || !sameResources(p.requests, reqs) || !sameWatched(u.keys, p.labels, labels)) {
		u.charge(p, -1)
		p.counted = false
		released = !counted
	}
	p.requests, p.labels = reqs, labels
	if counted && !p.counted {
		u.charge(p, 1)
		p.counted = true
	}
	if !counted {
		delete(u.pods, uid)
	}
	return released
}

// charge adds (sign 1) or removes (sign -1) p's requests to or from its
// tenants. u.mu is held.
func (u *Usage) charge(p *podRecord, sign int64) {
	u.add(tenantKey{"", p.namespace}, p.requests, sign)
	for _, k := range u.keys {
		if v, ok := p.labels[k]; ok {
			u.add(tenantKey{k, v}, p.requests, sign)
		}
	}
}

func (u *Usage) add(k tenantKey, r *abiv1.Resources, sign int64) {
	t := u.tenants[k]
	if t == nil {
		t = &tenant{key: k}
		u.tenants[k] = t
	}
	t.milliCPU += sign * r.GetMilliCpu()
	t.memory += sign * r.GetMemory()
	t.storage += sign * r.GetEphemeralStorage()
	t.pods += sign
	for _, s := range r.GetScalars() {
		if t.scalars == nil {
			t.scalars = map[string]int64{}
		}
		t.scalars[s.Name] += sign * s.Value
		if t.scalars[s.Name] == 0 {
			delete(t.scalars, s.Name)
		}
	}
	u.seq++
	t.seq, t.entry = u.seq, nil
	u.log = append(u.log, tenantRecord{seq: u.seq, t: t})
	if len(u.log) > 2*len(u.tenants)+logSlack {
		kept := make([]tenantRecord, 0, len(u.tenants))
		for _, r := range u.log {
			if r.t.seq == r.seq {
				kept = append(kept, r)
			}
		}
		u.log = kept
	}
}

func sameResources(a, b *abiv1.Resources) bool {
	if a.GetMilliCpu() != b.GetMilliCpu() || a.GetMemory() != b.GetMemory() || a.GetEphemeralStorage() != b.GetEphemeralStorage() || len(a.GetScalars()) != len(b.GetScalars()) {
		return false
	}
	for i, s := range a.GetScalars() {
		if o := b.Scalars[i]; o.Name != s.Name || o.Value != s.Value {
			return false
		}
	}
	return true
}

// sameWatched reports whether two label sets agree on every watched key.
func sameWatched(keys []string, a, b map[string]string) bool {
	for _, k := range keys {
		va, oka := a[k]
		vb, okb := b[k]
		if va != vb || oka != okb {
			return false
		}
	}
	return true
}

func (t *tenant) resources() *abiv1.Resources {
	r := &abiv1.Resources{MilliCpu: t.milliCPU, Memory: t.memory, EphemeralStorage: t.storage, Pods: t.pods}
	for name, v := range t.scalars {
		r.Scalars = append(r.Scalars, &abiv1.Scalar{Name: name, Value: v})
	}
	slices.SortFunc(r.Scalars, func(a, b *abiv1.Scalar) int { return strings.Compare(a.Name, b.Name) })
	return r
}

// Get returns the requests of a tenant's counted pods (requested.pods is
// their number), or nil when it has none. key "" is namespaces.
func (u *Usage) Get(key, tenantName string) *abiv1.Resources {
	u.mu.RLock()
	defer u.mu.RUnlock()
	t := u.tenants[tenantKey{key, tenantName}]
	if t == nil || t.pods == 0 {
		return nil
	}
	return t.resources()
}

// Seq returns the sequence number of the last change.
func (u *Usage) Seq() uint64 {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return u.seq
}

// AppendSince appends to dst the NodeSync tenant_usage entries that bring
// an instance at position seq up to date, for namespaces when namespaces is
// set and for the label keys listed, and returns the new position and the
// number of entries. Position 0 is an instance holding no usage: it gets
// every tenant with pods. Tenants are never forgotten (a tenant is a
// namespace or a label value, few), so no position needs a reset.
func (u *Usage) AppendSince(dst []byte, namespaces bool, keys []string, seq uint64) (out []byte, next uint64, n int) {
	u.mu.RLock()
	if seq == u.seq {
		u.mu.RUnlock()
		return dst, seq, 0
	}
	full := seq == 0 || seq > u.seq
	start := 0
	if !full {
		start = sort.Search(len(u.log), func(i int) bool { return u.log[i].seq > seq })
	}
	var stale []*tenant
	for _, r := range u.log[start:] {
		t := r.t
		if t.seq != r.seq || (full && t.pods == 0) {
			continue
		}
		if t.key.key == "" && !namespaces || t.key.key != "" && !slices.Contains(keys, t.key.key) {
			continue
		}
		e := t.entry
		if e == nil {
			e = t.encode()
			stale = append(stale, t)
		}
		dst = append(dst, e...)
		n++
	}
	next = u.seq
	u.mu.RUnlock()
	if len(stale) > 0 {
		// Cache the encodings for the next instance, unless the tenant
		// changed meanwhile.
		u.mu.Lock()
		for _, t := range stale {
			if t.entry == nil {
				t.entry = t.encode()
			}
		}
		u.mu.Unlock()
	}
	return dst, next, n
}

// encode returns t as a tenant_usage entry. Read under u.mu.
func (t *tenant) encode() []byte {
	m := abiv1.TenantUsage{Key: t.key.key, Tenant: t.key.tenant, Requested: t.resources()}
	if t.pods == 0 {
		m.Requested = &abiv1.Resources{}
	}
	body, err := m.MarshalVT()
	if err != nil {
		panic(err)
	}
	e := make([]byte, 0, len(body)+4)
	e = append(e, tagTenantUsage)
	e = appendVarint(e, uint64(len(body)))
	return append(e, body...)
}
