// Command quota is a wasmsched policy for multi-tenant quota: per tenant a
// guaranteed share (min, soft) and a ceiling (max, hard), read from
// scheduler-plugins' ElasticQuota objects or from settings. Tenants are
// namespaces, or the values of a namespace label.
//
// PreFilter rejects a pod whose tenant would exceed its max, and a pod that
// would borrow beyond its tenant's min more than the other tenants leave
// unused of their own min. Filter re-checks under the scheduler's
// preemption simulation (AddPod, RemovePod); Score ranks borrowing pods
// below guaranteed ones and packs them; SelectVictims reclaims borrowed
// quota for tenants below their min. README.md states the rules.
//
// The logic lives in plain functions and types (settings.go, quota.go,
// policy.go, victims.go) so that it is tested natively; this file only
// registers it.
package main

import (
	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
)

// policy is the instance's policy, built from the operator's settings by
// the Settings hook before any other call.
var policy *Policy

func init() {
	p := &guest.Policy{
		Name:           Name,
		NamespaceUsage: true,
		PreFilter:      func(c *guest.Cycle) guest.Status { return policy.PreFilter(c) },
		Filter:         func(c *guest.Cycle, n *guest.NodeInfo) guest.Status { return policy.Filter(c, n) },
		Score:          func(c *guest.Cycle, n *guest.NodeInfo) (int64, guest.Status) { return policy.Score(c, n) },
		AddPod: func(c *guest.Cycle, pod *abiv1.PodSummary, n *guest.NodeInfo) guest.Status {
			return policy.AddPod(c, pod, n)
		},
		RemovePod: func(c *guest.Cycle, pod *abiv1.PodSummary, n *guest.NodeInfo) guest.Status {
			return policy.RemovePod(c, pod, n)
		},
		SelectVictims: func(c *guest.Cycle, n *guest.NodeInfo, pods []*abiv1.PodSummary) ([]string, guest.Status) {
			return policy.SelectVictims(c, n, pods)
		},
	}
	p.Settings = func(raw []byte) (err error) {
		policy, err = guest.Load(raw, DefaultSettings(), New)
		if err == nil {
			// The kinds read depend on the settings; the SDK reports them
			// to the host after this hook.
			p.Context = policy.Kinds()
		}
		// A tenant's quota and usage come from the pod's namespace, its
		// requests and priority. Verdicts also follow tenant usage, which
		// the previous pod of a batch changes: the scheduler re-runs
		// Filter on every node it reuses, so a batched pod never lands
		// over quota, though a pod that starts borrowing inside a batch
		// is placed by the order of the one before it.
		p.Signature = &guest.Signature{Fields: []string{guest.PodNamespace, guest.PodRequests, guest.PodPriority}}
		// Usage falls when pods leave (anyone's: borrowing depends on
		// the others' unused min); quotas and tenants come from objects.
		p.Requeue = &guest.Requeue{PodDeleted: &guest.PodMatch{}, Objects: true}
		return err
	}
	guest.Register(p)
}

func main() {}
