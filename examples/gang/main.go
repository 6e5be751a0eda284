// Command gang is a wasmsched policy that places a group of pods all or
// nothing, the way coscheduling does: members wait at Permit until enough of
// their gang is ready, then bind together; when a member's wait times out,
// the rest of the gang is released.
//
// A pod joins gang G with the label gang.wasmsched.io/name: G and says how
// many members must be ready with the annotation
// gang.wasmsched.io/min-available: "N". See README.md.
package main

import "github.com/wasmsched/wasmsched/guest"

// policy is set once by the settings hook, before any other call.
var policy *Policy

func init() {
	guest.Register(&guest.Policy{
		Name: "gang",
		Settings: func(raw []byte) (err error) {
			policy, err = guest.Load(raw, DefaultSettings(), New)
			return err
		},
		// Members already placed count toward their gang: Permit reads the
		// pods of every node.
		WantsPods:     true,
		WantsAllNodes: true,
		PreFilter:     func(c *guest.Cycle) guest.Status { return policy.PreFilter(c) },
		Permit: func(c *guest.Cycle, n *guest.NodeInfo, waiting []guest.WaitingPod) guest.PermitResult {
			return policy.Permit(c, n, waiting)
		},
		Unreserve: func(c *guest.Cycle, n *guest.NodeInfo, waiting []guest.WaitingPod) []guest.WaitingPodAction {
			return policy.Unreserve(c, n, waiting)
		},
	})
}

func main() {}
