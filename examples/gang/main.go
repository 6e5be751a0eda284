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
		// A gang is a namespace, a label and an annotation; Permit reads
		// the other members, which are not part of this pod.
		Signature: &guest.Signature{
			Fields:         []string{guest.PodNamespace},
			LabelKeys:      []string{LabelName},
			AnnotationKeys: []string{AnnotationMinAvailable},
		},
		// A gang turned away waits for members to arrive (a malformed
		// annotation waits for the pod itself to change, which always
		// retries it).
		Requeue: &guest.Requeue{PodAdded: &guest.PodMatch{SameLabelKeys: []string{LabelName}}},
	})
}

func main() {}
