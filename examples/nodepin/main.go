// Command nodepin is a wasmsched policy that lets pods run only on a fixed
// list of nodes: the classic "only these nodes" filter.
//
// Settings: {"nodes": ["k8s-node1"]} (the default). Any other node is
// rejected with a reason naming the allowed nodes.
package main

import (
	"errors"
	"strconv"
	"strings"

	"github.com/wasmsched/wasmsched/guest"
)

// Settings are the operator's settings.
type Settings struct {
	Nodes []string `json:"nodes"`
}

// DefaultSettings returns the settings of an operator who configured nothing.
func DefaultSettings() Settings { return Settings{Nodes: []string{"k8s-node1"}} }

// Policy holds the validated settings.
type Policy struct {
	allowed  map[string]bool
	rejected guest.Status
}

// New validates settings and builds the policy.
func New(s Settings) (*Policy, error) {
	if len(s.Nodes) == 0 {
		return nil, errors.New(`settings: "nodes" must list at least one node`)
	}
	p := &Policy{allowed: make(map[string]bool, len(s.Nodes))}
	for _, n := range s.Nodes {
		if n == "" {
			return nil, errors.New(`settings: "nodes" contains an empty name`)
		}
		p.allowed[n] = true
	}
	p.rejected = guest.RejectUnresolvable("nodepin: node is not one of the allowed nodes [%s]", summarize(s.Nodes, 5))
	return p, nil
}

// Filter admits the allowed nodes only.
func (p *Policy) Filter(_ *guest.Cycle, n *guest.NodeInfo) guest.Status {
	if p.allowed[n.Name()] {
		return guest.OK()
	}
	return p.rejected
}

// summarize joins up to n names and counts the rest, so that a long list
// does not flood events.
func summarize(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + ", and " + strconv.Itoa(len(names)-n) + " more"
}

var policy *Policy

func init() {
	guest.Register(&guest.Policy{
		Name: "nodepin",
		Settings: func(raw []byte) (err error) {
			policy, err = guest.Load(raw, DefaultSettings(), New)
			return err
		},
		Filter: func(c *guest.Cycle, n *guest.NodeInfo) guest.Status { return policy.Filter(c, n) },
		// The rule reads nothing of the pod, and only a new node can fit.
		Signature: &guest.Signature{},
		Requeue:   &guest.Requeue{NodeAdded: true},
	})
}

func main() {}
