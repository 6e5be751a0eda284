// Command groupprobe is a test policy for pod-group cycles: its Reserve
// fails a member of a pod group unless its cycle carries the group (the
// PodGroup, the group cycle and the placement tried), so that a test sees
// the scheduler hand them over; Reserve and Unreserve are otherwise no-ops
// the scheduler's metrics count. It is built by the tests; it is not an
// example to copy.
package main

import "github.com/wasmsched/wasmsched/guest"

// settings: RequirePlacement also requires the placement's name, which
// Kubernetes 1.36's scheduler does not tell.
type settings struct {
	RequirePlacement bool `json:"requirePlacement"`
}

var s settings

func init() {
	guest.Register(&guest.Policy{
		Name:           "groupprobe",
		Settings:       func(raw []byte) error { return guest.ParseSettings(raw, &s) },
		WantsPodGroups: true,
		Reserve: func(c *guest.Cycle, n *guest.NodeInfo) guest.Status {
			name := c.Pod.PodGroupName()
			if name == "" {
				return guest.OK()
			}
			pg := c.PodGroup()
			placement, ok := c.GroupCycle()
			switch {
			case pg == nil || pg.Name() != name:
				return guest.Errorf("groupprobe: member of %s without its PodGroup", name)
			case !ok:
				return guest.Errorf("groupprobe: member of %s reserved outside a pod-group cycle", name)
			case placement == "" && s.RequirePlacement:
				return guest.Errorf("groupprobe: member of %s reserved without the placement's name", name)
			}
			return guest.OK()
		},
		Unreserve: func(*guest.Cycle, *guest.NodeInfo, []guest.WaitingPod) []guest.WaitingPodAction { return nil },
	})
}

func main() {}
