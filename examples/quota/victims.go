package main

import (
	"cmp"
	"slices"
	"strings"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
)

// need is what evicting must free for the pod: per resource, the node's
// shortage and, for the pod's own tenant, its excess over its quota.
type need struct {
	name string
	// node is how much more of the resource the node must have free.
	node int64
	// tenant is how much the pod's tenant must give back (evicting its own
	// pods only).
	tenant int64
}

// SelectVictims chooses, on node n, the pods to evict so that the cycle's
// pod fits, lowest priority first, until what they free covers the node's
// shortage (and the tenant's excess when the pod evicts its own tenant's
// pods). Which pods may go depends on the pod:
//   - within its tenant's min: pods of other tenants that borrow (use more
//     than their min of some resource), whatever their priority;
//   - borrowing or over max: pods of its own tenant of lower priority;
//   - not under quota: pods of tenants without quota of lower priority.
//
// It rejects the node when those pods cannot free enough.
func (p *Policy) SelectVictims(c *guest.Cycle, n *guest.NodeInfo, pods []*abiv1.PodSummary) ([]string, guest.Status) {
	st, s := state(c)
	if !s.IsSuccess() {
		return nil, s
	}
	if st.every() == nil {
		return nil, st.verdict
	}
	needs := p.needs(c, st, n)
	if len(needs) == 0 {
		return nil, guest.Reject("quota: evicting cannot help on node %s: the pod fits its resources and its tenant's quota", n.Name())
	}
	reclaim := st.own != nil && !withinMin(c.Pod, st.own)
	// left is each victim tenant's use as the choice goes on, so that a
	// lender's reclaim stops taking from a tenant back at its min.
	left := map[string][]int64{}
	type candidate struct {
		pod    *abiv1.PodSummary
		tenant *tenant
	}
	var cands []candidate
	for _, v := range pods {
		if v.GetUid() == c.Pod.UID() {
			continue
		}
		t := st.lookup(p.tenantOf(c, v.GetNamespace()))
		switch {
		case st.own == nil:
			if t != nil || v.GetPriority() >= c.Pod.Priority() {
				continue
			}
		case reclaim:
			if t != st.own || v.GetPriority() >= c.Pod.Priority() {
				continue
			}
		default:
			if t == nil || t == st.own || !t.aboveMin() {
				continue
			}
		}
		cands = append(cands, candidate{v, t})
	}
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(a.pod.GetPriority(), b.pod.GetPriority()) })
	var victims []string
	for _, v := range cands {
		if covered(needs) {
			break
		}
		own := st.own != nil && v.tenant == st.own
		if !frees(needs, v.pod, own, false) {
			continue
		}
		if v.tenant != nil && !own {
			used := left[v.tenant.name]
			if used == nil {
				used = slices.Clone(v.tenant.used)
				left[v.tenant.name] = used
			}
			if !above(v.tenant.quota, used) {
				continue
			}
			for i, b := range v.tenant.quota.bounds {
				used[i] = max(0, used[i]-guest.Quantity(v.pod.GetRequests(), b.name))
			}
		}
		frees(needs, v.pod, own, true)
		victims = append(victims, v.pod.GetUid())
	}
	if !covered(needs) {
		return nil, guest.Reject("quota: evicting %s on node %s cannot free %s", whom(st, reclaim), n.Name(), short(needs))
	}
	return victims, guest.OK()
}

// withinMin reports whether the pod's tenant stays within its min of
// every resource the pod requests once the pod runs.
func withinMin(pod *guest.Pod, t *tenant) bool {
	for i, b := range t.quota.bounds {
		need := pod.Request(b.name)
		if need > 0 && t.used[i]+need > b.min {
			return false
		}
	}
	return true
}

// above reports whether use exceeds q's min of some resource.
func above(q *quota, used []int64) bool {
	for i, b := range q.bounds {
		if used[i] > b.min {
			return true
		}
	}
	return false
}

// needs returns what must be freed for the pod on n: for every resource
// the pod requests, the node's shortage, and (for a pod of a tenant over
// its quota) the tenant's excess over its max or over what it may borrow.
func (p *Policy) needs(c *guest.Cycle, st *cycleState, n *guest.NodeInfo) []need {
	var out []need
	req := c.Pod.Message().GetRequests()
	eachAmount(req, func(name string, v int64) {
		nd := need{name: name, node: v - n.Free(name)}
		if t := st.own; t != nil {
			if i := t.quota.index(name); i >= 0 {
				b := t.quota.bounds[i]
				after := t.used[i] + v
				if b.max != unlimited {
					nd.tenant = after - b.max
				}
				if after > b.min {
					nd.tenant = max(nd.tenant, after-b.min-st.lendable(name, t))
				}
			}
		}
		if nd.node > 0 || nd.tenant > 0 {
			out = append(out, need{name: name, node: max(0, nd.node), tenant: max(0, nd.tenant)})
		}
	})
	if n.Allocatable(guest.ResourcePods) > 0 && int64(n.PodCount()) >= n.Allocatable(guest.ResourcePods) {
		out = append(out, need{name: guest.ResourcePods, node: int64(n.PodCount()) + 1 - n.Allocatable(guest.ResourcePods)})
	}
	return out
}

// eachAmount calls fn for every resource r names with an amount above 0.
func eachAmount(r *abiv1.Resources, fn func(name string, v int64)) {
	if r == nil {
		return
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{guest.ResourceCPU, r.MilliCpu}, {guest.ResourceMemory, r.Memory}, {guest.ResourceEphemeralStorage, r.EphemeralStorage}} {
		if f.v > 0 {
			fn(f.name, f.v)
		}
	}
	for _, s := range r.Scalars {
		if s.Value > 0 {
			fn(s.Name, s.Value)
		}
	}
}

// frees reports whether evicting victim frees anything still needed, and
// with apply subtracts it from needs; ownTenant says the victim's use
// counts against the tenant's excess too.
func frees(needs []need, victim *abiv1.PodSummary, ownTenant, apply bool) bool {
	useful := false
	for i := range needs {
		nd := &needs[i]
		v := guest.Quantity(victim.GetRequests(), nd.name)
		if nd.name == guest.ResourcePods {
			v = 1
		}
		if v <= 0 {
			continue
		}
		if nd.node > 0 || (ownTenant && nd.tenant > 0) {
			useful = true
		}
		if apply {
			nd.node = max(0, nd.node-v)
			if ownTenant {
				nd.tenant = max(0, nd.tenant-v)
			}
		}
	}
	return useful
}

// covered reports whether nothing more is needed.
func covered(needs []need) bool {
	for _, nd := range needs {
		if nd.node > 0 || nd.tenant > 0 {
			return false
		}
	}
	return true
}

// whom names the pods SelectVictims may evict, for its rejection.
func whom(st *cycleState, reclaim bool) string {
	switch {
	case st.own == nil:
		return "lower-priority pods of tenants without quota"
	case reclaim:
		return "lower-priority pods of tenant " + st.own.name
	}
	return "pods of borrowing tenants"
}

// short lists what is still needed: "cpu 2, memory 1Gi".
func short(needs []need) string {
	var b strings.Builder
	for _, nd := range needs {
		v := max(nd.node, nd.tenant)
		if v <= 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(nd.name + " " + formatAmount(nd.name, v))
	}
	return b.String()
}
