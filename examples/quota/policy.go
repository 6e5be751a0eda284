package main

import (
	"slices"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
)

// parsedEQ is one ElasticQuota object as last parsed.
type parsedEQ struct {
	namespace, name, version string
	quota                    *quota
}

// elasticQuotas returns the ElasticQuota objects resident in the instance,
// parsed: an object is parsed again only when its resource version
// changed. A malformed amount fails the cycle with an error naming the
// object.
func (p *Policy) elasticQuotas(c *guest.Cycle) ([]parsedEQ, guest.Status) {
	objs := c.Objects(KindElasticQuota)
	same := len(objs) == len(p.eqs)
	for i := 0; same && i < len(objs); i++ {
		o, e := objs[i], &p.eqs[i]
		same = o.Namespace() == e.namespace && o.Name() == e.name && o.ResourceVersion() == e.version
	}
	if same {
		return p.eqs, guest.OK()
	}
	old := map[string]parsedEQ{}
	for _, e := range p.eqs {
		old[e.namespace+"/"+e.name] = e
	}
	eqs := make([]parsedEQ, 0, len(objs))
	for _, o := range objs {
		if e, ok := old[o.Namespace()+"/"+o.Name()]; ok && e.version == o.ResourceVersion() {
			eqs = append(eqs, e)
			continue
		}
		q := &quota{}
		for _, part := range []struct {
			field string
			add   func(string, int64)
		}{{"min", q.addMin}, {"max", q.addMax}} {
			if bad := addList(o.Get("spec", part.field), part.add); bad != "" {
				return nil, guest.Errorf("quota: ElasticQuota %s/%s: spec.%s.%s is not a non-negative quantity", o.Namespace(), o.Name(), part.field, bad)
			}
		}
		eqs = append(eqs, parsedEQ{namespace: o.Namespace(), name: o.Name(), version: o.ResourceVersion(), quota: q})
	}
	p.eqs = eqs
	return eqs, guest.OK()
}

// tenantOf returns the tenant of namespace ns: ns itself, or with a tenant
// label the label's value on the Namespace object ("" when the namespace
// is unknown or unlabelled: such pods are not under quota).
func (p *Policy) tenantOf(c *guest.Cycle, ns string) string {
	if p.tenantLabel == "" {
		return ns
	}
	n := c.Namespace(ns)
	if n == nil {
		return ""
	}
	t, _ := n.Label(p.tenantLabel)
	return t
}

// roster is every tenant with a quota, with its position by name. Cycles
// share it while what it was built from stays the same (owners: the tenant
// of each ElasticQuota's namespace), and never change it.
type roster struct {
	eqs     []parsedEQ
	owners  []string
	tenants []tenant // used is nil
	index   map[string]int
	// bounds is the number of bounds over all quotas.
	bounds int
}

// tenants returns every tenant with a quota: from the ElasticQuota objects
// of its namespaces (summed), else from the settings.
func (p *Policy) tenants(c *guest.Cycle) (*roster, guest.Status) {
	var eqs []parsedEQ
	if p.readEQ {
		var s guest.Status
		if eqs, s = p.elasticQuotas(c); !s.IsSuccess() {
			return nil, s
		}
	}
	if r := p.roster; r != nil && len(r.eqs) == len(eqs) && (len(eqs) == 0 || &r.eqs[0] == &eqs[0]) {
		same := true
		for i := 0; same && i < len(eqs); i++ {
			same = p.tenantOf(c, eqs[i].namespace) == r.owners[i]
		}
		if same {
			return r, guest.OK()
		}
	}
	r := &roster{eqs: eqs, owners: make([]string, len(eqs)), index: map[string]int{}}
	fromEQ := map[string]*quota{}
	for i, e := range eqs {
		t := p.tenantOf(c, e.namespace)
		r.owners[i] = t
		if t == "" {
			continue
		}
		q := fromEQ[t]
		if q == nil {
			q = &quota{}
			fromEQ[t] = q
		}
		q.add(e.quota)
	}
	add := func(name string, q *quota) {
		r.index[name] = len(r.tenants)
		r.tenants = append(r.tenants, tenant{name: name, quota: q, weight: p.weight(name)})
		r.bounds += len(q.bounds)
	}
	for name, q := range p.configured {
		if fromEQ[name] == nil {
			add(name, q)
		}
	}
	for name, q := range fromEQ {
		add(name, q)
	}
	p.roster = r
	return r, guest.OK()
}

// cycleState is what PreFilter computes for one cycle: the pod's tenant,
// its quota and use, and the verdict; every tenant's use when the verdict
// or the scheduler's simulation needs it. AddPod and RemovePod change the
// use under the scheduler's simulations.
type cycleState struct {
	// tenant is the pod's tenant; own its quota and use, nil when the
	// tenant has no quota (the pod is not under quota).
	tenant string
	own    *tenant
	// tenants are the roster's tenants with their use in this cycle, by
	// roster position (index); nil when the roster could not be built,
	// and until every read them (see load).
	tenants []tenant
	index   map[string]int
	// load fills tenants (and points own into them) on every's first
	// call; nil once they are loaded.
	load func(*cycleState)
	// verdict is PreFilter's; borrowed lists the positions in
	// own.quota.bounds of the resources the pod borrows.
	verdict  guest.Status
	borrowed []int
	// changed is set by AddPod and RemovePod: Filter judges again.
	changed bool
}

// every returns the roster's tenants with their use in this cycle (nil
// when the roster could not be built), reading the others' use on the
// first call. A pod within its tenant's min needs only its own tenant's
// use, and most pods are: PreFilter then reads one tenant, not all. The
// use read later in the cycle is the one PreFilter would have read: the
// host sends tenant usage only before a cycle starts.
func (st *cycleState) every() []tenant {
	if st.load != nil {
		load := st.load
		st.load = nil
		load(st)
	}
	return st.tenants
}

// lookup returns the tenant named name in the cycle, nil when it has no
// quota.
func (st *cycleState) lookup(name string) *tenant {
	if i, ok := st.index[name]; ok {
		return &st.every()[i]
	}
	return nil
}

// prepare computes the cycle's state: with tenants by namespace, the pod's
// tenant's use only (every reads the others' when needed); with a tenant
// label, every tenant's, since a tenant's use sums its namespaces' and
// finding them reads every namespace anyway.
func (p *Policy) prepare(c *guest.Cycle) *cycleState {
	st := &cycleState{tenant: p.tenantOf(c, c.Pod.Namespace())}
	r, s := p.tenants(c)
	if !s.IsSuccess() {
		st.verdict = s
		return st
	}
	st.index = r.index
	st.load = func(st *cycleState) { p.loadTenants(c, r, st) }
	if p.tenantLabel != "" {
		st.every()
	} else if i, ok := r.index[st.tenant]; ok {
		own := r.tenants[i]
		own.used = make([]int64, len(own.quota.bounds))
		own.addUsage(c.TenantUsage("", own.name), 1)
		st.own = &own
	}
	st.verdict, st.borrowed = judge(c.Pod, st)
	return st
}

// loadTenants fills st.tenants with the roster's tenants and their use in
// the cycle, and points st.own at the pod's tenant among them.
func (p *Policy) loadTenants(c *guest.Cycle, r *roster, st *cycleState) {
	// One allocation for the tenants and one for their use: the roster's
	// quotas are shared.
	st.tenants = slices.Clone(r.tenants)
	if st.tenants == nil {
		st.tenants = []tenant{}
	}
	used := make([]int64, r.bounds)
	for i := range st.tenants {
		t := &st.tenants[i]
		t.used, used = used[:len(t.quota.bounds):len(t.quota.bounds)], used[len(t.quota.bounds):]
	}
	if p.tenantLabel == "" {
		for i := range st.tenants {
			t := &st.tenants[i]
			t.addUsage(c.TenantUsage("", t.name), 1)
		}
	} else {
		c.EachTenant("", func(ns string, used *abiv1.Resources) bool {
			if i, ok := st.index[p.tenantOf(c, ns)]; ok {
				st.tenants[i].addUsage(used, 1)
			}
			return true
		})
	}
	if i, ok := st.index[st.tenant]; ok {
		st.own = &st.tenants[i]
	}
}

// judge applies the quota rules to pod with the use st holds: over max is
// rejected; above min is borrowing, allowed while the other tenants' unused
// min covers all the tenant would then borrow (its use above its min). It returns the verdict and the resources borrowed.
func judge(pod *guest.Pod, st *cycleState) (guest.Status, []int) {
	t := st.own
	if t == nil {
		return guest.OK(), nil
	}
	req := pod.Message().GetRequests()
	for i, b := range t.quota.bounds {
		need := guest.Quantity(req, b.name)
		if need > 0 && b.max != unlimited && t.used[i]+need > b.max {
			return guest.Reject("quota: tenant %s would exceed its max of %s: uses %s, pod requests %s, max %s",
				t.name, b.name, formatAmount(b.name, t.used[i]), formatAmount(b.name, need), formatAmount(b.name, b.max)), nil
		}
	}
	var borrowed []int
	for i, b := range t.quota.bounds {
		need := guest.Quantity(req, b.name)
		after := t.used[i] + need
		if need == 0 || after <= b.min {
			continue
		}
		borrowed = append(borrowed, i)
		if lend := st.lendable(b.name, t); after-b.min > lend {
			return guest.Reject("quota: tenant %s cannot borrow %s: uses %s, pod requests %s, min %s, other tenants' unused min %s",
				t.name, b.name, formatAmount(b.name, t.used[i]), formatAmount(b.name, need), formatAmount(b.name, b.min),
				formatAmount(b.name, max(0, lend))), borrowed
		}
	}
	return guest.OK(), borrowed
}

// lendable is what the tenants other than t may lend of resource name:
// the sum over those governing it of min - used, which counts what
// borrowers already took (used above min) against what others leave
// unused (min above used). It equals "the sum of the mins minus the sum of
// the uses", the condition scheduler-plugins' CapacityScheduling checks.
func (st *cycleState) lendable(name string, t *tenant) int64 {
	var l int64
	tenants := st.every()
	for i := range tenants {
		u := &tenants[i]
		if u.name == t.name {
			continue
		}
		if i := u.quota.index(name); i >= 0 {
			l += u.quota.bounds[i].min - u.used[i]
		}
	}
	return l
}

// PreFilter computes the tenants' use and the pod's verdict, once per
// cycle. It always leaves the state, even when it rejects: preemption's
// Filter and SelectVictims read it.
func (p *Policy) PreFilter(c *guest.Cycle) guest.Status {
	st := p.prepare(c)
	c.State = st
	return st.verdict
}

// state returns the cycle's state, or an error status when PreFilter did
// not leave one.
func state(c *guest.Cycle) (*cycleState, guest.Status) {
	st, ok := c.State.(*cycleState)
	if !ok {
		return nil, guest.Errorf("quota: no cycle state: PreFilter did not run")
	}
	return st, guest.OK()
}

// Filter passes every node when nothing changed since PreFilter (quota does
// not depend on the node), and judges again with the changes AddPod and
// RemovePod made (preemption's victims removed, nominated pods added).
func (p *Policy) Filter(c *guest.Cycle, _ *guest.NodeInfo) guest.Status {
	st, s := state(c)
	if !s.IsSuccess() {
		return s
	}
	if !st.changed || st.tenants == nil {
		return st.verdict
	}
	v, _ := judge(c.Pod, st)
	return v
}

// AddPod counts a pod the scheduler adds to a node in a simulation (a
// nominated pod, a victim put back) in its tenant's use.
func (p *Policy) AddPod(c *guest.Cycle, pod *abiv1.PodSummary, _ *guest.NodeInfo) guest.Status {
	return p.change(c, pod, 1)
}

// RemovePod takes a pod the scheduler removes in a simulation (a
// preemption victim) out of its tenant's use.
func (p *Policy) RemovePod(c *guest.Cycle, pod *abiv1.PodSummary, _ *guest.NodeInfo) guest.Status {
	return p.change(c, pod, -1)
}

func (p *Policy) change(c *guest.Cycle, pod *abiv1.PodSummary, sign int64) guest.Status {
	st, s := state(c)
	if !s.IsSuccess() {
		return s
	}
	st.changed = true
	if t := st.lookup(p.tenantOf(c, pod.GetNamespace())); t != nil {
		t.addUsage(pod.GetRequests(), sign)
	}
	return guest.OK()
}

// Guaranteed is the score of every node for a pod that borrows nothing:
// Score leaves its placement to the other plugins.
const Guaranteed = 100

// BorrowingMax is the highest score of a borrowing pod, which is always
// below Guaranteed.
const BorrowingMax = 50

// Score gives a pod within its tenant's min (or not under quota) Guaranteed
// on every node. A borrowing pod scores at most BorrowingMax, more on
// fuller nodes (the share of the borrowed resources requested there with
// the pod, averaged): borrowed pods gather on few nodes, where reclaiming
// them frees whole nodes' worth for the lenders. The tenant's weight over
// the largest weight scales the score, so a heavier tenant's borrowing
// pods weigh more against the other plugins' preferences.
func (p *Policy) Score(c *guest.Cycle, n *guest.NodeInfo) (int64, guest.Status) {
	st, s := state(c)
	if !s.IsSuccess() {
		return 0, s
	}
	if st.own == nil || len(st.borrowed) == 0 {
		return Guaranteed, guest.OK()
	}
	var fill, counted int64
	for _, i := range st.borrowed {
		name := st.own.quota.bounds[i].name
		alloc := n.Allocatable(name)
		if alloc <= 0 {
			continue
		}
		used := n.Requested(name) + c.Pod.Request(name)
		fill += min(100, used*100/alloc)
		counted++
	}
	if counted > 0 {
		fill /= counted
	}
	return fill * BorrowingMax * st.own.weight / (100 * p.maxWeight), guest.OK()
}
