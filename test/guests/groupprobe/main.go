// Command groupprobe is a test policy for pod-group cycles: its Reserve
// fails a member of a pod group unless its cycle carries the group (the
// PodGroup, the group cycle and the placement tried), so that a test sees
// the scheduler hand them over; Reserve and Unreserve are otherwise no-ops
// the scheduler's metrics count. It is built by the tests; it is not an
// example to copy.
package main

import (
	"strings"

	"github.com/wasmsched/wasmsched/guest"
)

// settings: RequirePlacement also requires the placement's name, which
// Kubernetes 1.36's scheduler does not tell. Generate, when set, adds a
// PlacementGenerate that misbehaves so: "panic" traps, "duplicate" names
// a node twice in a placement, "many" proposes 300 placements, "reject"
// rejects the group, "error" answers Error. PostFilter, when set, adds a
// PodGroupPostFilter: "reject" answers Unschedulable with a reason naming
// the group, its members, the nodes and the rejection it was handed,
// "unresolvable" UnschedulableAndUnresolvable, "nominate" nominates every
// member to the first node, "panic" traps, "loop" never returns, "error"
// answers Error.
type settings struct {
	RequirePlacement bool   `json:"requirePlacement"`
	Generate         string `json:"generate"`
	PostFilter       string `json:"postFilter"`
}

var s settings

var p = &guest.Policy{Name: "groupprobe"}

func generate(g *guest.Group, parent guest.Placement) ([]guest.Placement, guest.Status) {
	switch s.Generate {
	case "panic":
		panic("groupprobe: panic in PlacementGenerate")
	case "duplicate":
		return []guest.Placement{{Name: "twice", Nodes: []*guest.NodeInfo{parent.Nodes[0], parent.Nodes[0]}}}, guest.OK()
	case "reject":
		return nil, guest.Reject("groupprobe: no placement for %s", g.PodGroup.Key())
	case "many":
		out := make([]guest.Placement, 300)
		for i := range out {
			out[i] = guest.Placement{Name: "p" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Nodes: parent.Nodes[:1]}
		}
		return out, guest.OK()
	}
	return nil, guest.Errorf("groupprobe: error in PlacementGenerate")
}

func postFilter(g *guest.Group, f *guest.GroupFailure) ([]guest.Nomination, guest.Status) {
	switch s.PostFilter {
	case "reject":
		rej := ""
		if len(f.Rejection) > 0 {
			rej = " after " + strings.Join(f.Rejection, "; ")
		}
		return nil, guest.Reject("groupprobe: group %s of %d pods fits none of %d nodes%s", g.PodGroup.Key(), len(g.Pods), len(f.Nodes), rej)
	case "unresolvable":
		return nil, guest.Status{Code: guest.UnschedulableAndUnresolvable, Reasons: []string{"groupprobe: group " + g.PodGroup.Key() + " never fits"}}
	case "nominate":
		out := make([]guest.Nomination, len(g.Pods))
		for i, pod := range g.Pods {
			out[i] = guest.Nomination{Pod: pod, Node: f.Nodes[0].Name()}
		}
		return out, guest.OK()
	case "panic":
		panic("groupprobe: panic in PodGroupPostFilter")
	case "loop":
		for {
		}
	}
	return nil, guest.Errorf("groupprobe: error in PodGroupPostFilter")
}

func init() {
	*p = guest.Policy{
		Name: "groupprobe",
		Settings: func(raw []byte) error {
			if err := guest.ParseSettings(raw, &s); err != nil {
				return err
			}
			if s.Generate != "" {
				p.PlacementGenerate = generate
			}
			if s.PostFilter != "" {
				p.PodGroupPostFilter = postFilter
			}
			return nil
		},
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
	}
	guest.Register(p)
}

func main() {}
