// Command edge is a wasmsched policy that keeps space workloads on edge
// nodes and everything else off them.
//
// A pod annotated type: space may only run on nodes labelled
// kubernetes.io/role: edge; any other pod may run anywhere but prefers
// nodes that are not edge nodes. The annotation and the label are settings
// with those defaults. README.md lists the rules and settings.
//
// The logic lives in policy.go, tested natively; this file only registers
// it.
package main

import "github.com/wasmsched/wasmsched/guest"

// policy is the instance's policy, built from the operator's settings by
// the Settings hook before any other call.
var policy *Policy

func init() {
	p := &guest.Policy{
		Name:      Name,
		PreFilter: func(c *guest.Cycle) guest.Status { return policy.PreFilter(c) },
		Filter:    func(c *guest.Cycle, n *guest.NodeInfo) guest.Status { return policy.Filter(c, n) },
		Score:     func(c *guest.Cycle, n *guest.NodeInfo) (int64, guest.Status) { return policy.Score(c, n) },
	}
	p.Settings = func(raw []byte) (err error) {
		policy, err = guest.Load(raw, DefaultSettings(), New)
		if err == nil {
			// The annotation and the label the rules read come from the
			// settings; the SDK reports the declarations after this hook.
			p.Signature = &guest.Signature{AnnotationKeys: []string{policy.space.key}}
			p.Requeue = &guest.Requeue{NodeLabelKeys: []string{policy.edge.key}}
		}
		return err
	}
	guest.Register(p)
}

func main() {}
