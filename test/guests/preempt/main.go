// Command preempt is a test policy for preemption (host/plugin's
// preemption tests).
//
// Filter: a pod labelled needs-gone=NAME fits a node only once the
// scheduler's simulation removed the pod NAME from it (RemovePod; AddPod
// puts it back). The policy reads no node data, so only the pod changes
// reaching it can make such a pod fit: the scheduler's own preemption must
// pass them on. Other pods pass.
//
// SelectVictims: the pods labelled expendable=true on the node, whatever
// their priority, in the order the host sends them.
package main

import (
	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
)

// removed is the cycle state: pods the simulation removed and did not put
// back.
type removed map[string]bool

func init() {
	guest.Register(&guest.Policy{
		Name:      "preempt",
		PreFilter: func(c *guest.Cycle) guest.Status { c.State = removed{}; return guest.OK() },
		RemovePod: func(c *guest.Cycle, pod *abiv1.PodSummary, n *guest.NodeInfo) guest.Status {
			c.State.(removed)[pod.GetName()] = true
			return guest.OK()
		},
		AddPod: func(c *guest.Cycle, pod *abiv1.PodSummary, n *guest.NodeInfo) guest.Status {
			delete(c.State.(removed), pod.GetName())
			return guest.OK()
		},
		Filter: func(c *guest.Cycle, n *guest.NodeInfo) guest.Status {
			name, ok := c.Pod.Label("needs-gone")
			if !ok || c.State.(removed)[name] {
				return guest.OK()
			}
			return guest.Reject("preempt: pod %s is still on %s", name, n.Name())
		},
		SelectVictims: func(c *guest.Cycle, n *guest.NodeInfo, pods []*abiv1.PodSummary) ([]string, guest.Status) {
			var out []string
			for _, p := range pods {
				if v, _ := guest.Lookup(p.GetLabels(), "expendable"); v == "true" {
					out = append(out, p.GetUid())
				}
			}
			return out, guest.OK()
		},
	})
}

func main() {}
