// Command zone is a wasmsched policy that keeps pods out of denied zones and
// spreads the pods of a group evenly over the allowed ones.
//
// It reads the topology.kubernetes.io/zone node label. Pods carrying the
// group label (default "app") are spread: placing one in a zone must not
// leave that zone more than maxSkew pods of its group ahead of the zone with
// the fewest, and zones with fewer pods of the group score higher. See
// README.md for the rules and settings.
package main

import "github.com/wasmsched/wasmsched/guest"

// policy is set once by the settings hook, before any other call.
var policy *Policy

func init() {
	guest.Register(&guest.Policy{
		Name: "zone",
		Settings: func(raw []byte) (err error) {
			policy, err = guest.Load(raw, DefaultSettings(), New)
			return err
		},
		// Counting a group's pods per zone reads every node's pods.
		WantsPods:     true,
		WantsAllNodes: true,
		PreFilter:     func(c *guest.Cycle) guest.Status { return policy.PreFilter(c) },
		Filter:        func(c *guest.Cycle, n *guest.NodeInfo) guest.Status { return policy.Filter(c, n) },
		Score:         func(c *guest.Cycle, n *guest.NodeInfo) (int64, guest.Status) { return policy.Score(c, n) },
		NormalizeScore: func(c *guest.Cycle, scores []guest.NodeScore) guest.Status {
			return policy.NormalizeScore(c, scores)
		},
		// Spreading counts a group's pods on every node, which placing the
		// previous pod changes: only pods outside groups are batched.
		Sign: func(pod *guest.Pod) ([]byte, bool) { return policy.Sign(pod) },
		// A group's spread changes when its pods come and go, and with
		// nodes' zones.
		Requeue: &guest.Requeue{
			NodeLabelKeys: []string{guest.LabelZone},
			PodAdded:      &guest.PodMatch{SameNamespace: true},
			PodDeleted:    &guest.PodMatch{SameNamespace: true},
		},
	})
}

func main() {}
