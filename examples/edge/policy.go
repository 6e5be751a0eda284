package main

import (
	"fmt"
	"strings"

	"github.com/wasmsched/wasmsched/guest"
)

// Name is the policy's name; every rejection reason starts with it.
const Name = "edge"

// Settings are the operator's settings, as JSON:
//
//	{"annotation": "type=space", "edgeLabel": "kubernetes.io/role=edge"}
//
// Each is a key=value pair; the value may be empty ("node-role.kubernetes.io/edge="
// matches that label set to ""). Fields left out keep their defaults.
type Settings struct {
	// Annotation is the pod annotation that marks a space workload.
	Annotation string `json:"annotation"`
	// EdgeLabel is the node label that marks an edge node.
	EdgeLabel string `json:"edgeLabel"`
}

// DefaultSettings returns the settings used where the operator gives none.
func DefaultSettings() Settings {
	return Settings{Annotation: "type=space", EdgeLabel: "kubernetes.io/role=edge"}
}

// pair is a parsed key=value setting.
type pair struct{ key, value string }

func (p pair) String() string { return p.key + "=" + p.value }

func parsePair(field, s string) (pair, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return pair{}, fmt.Errorf("settings: %q must be key=value with a non-empty key, not %q", field, s)
	}
	return pair{k, v}, nil
}

// Policy is the edge policy built from validated settings. Its methods are
// the extension points registered in main.go; like every policy function
// they are called from one goroutine at a time per instance.
type Policy struct {
	space, edge pair
	// noLabel rejects a node without the edge label's key; it does not
	// depend on the pod or the node, so it is built once.
	noLabel guest.Status
	// other is the last rejection of a node whose label has another value,
	// and that value: nodes share a handful of roles, so this saves
	// formatting the same reason for every node.
	otherValue string
	other      guest.Status
}

// New validates the settings and builds the policy.
func New(s Settings) (*Policy, error) {
	space, err := parsePair("annotation", s.Annotation)
	if err != nil {
		return nil, err
	}
	edge, err := parsePair("edgeLabel", s.EdgeLabel)
	if err != nil {
		return nil, err
	}
	p := &Policy{space: space, edge: edge}
	p.noLabel = guest.RejectUnresolvable("%s: not an edge node: space workloads (annotation %s) need label %s, node has no %s label", Name, space, edge, edge.key)
	return p, nil
}

// isSpace reports whether the pod is a space workload. It is a binary
// search over the pod's annotations and allocates nothing, so Filter and
// Score call it directly rather than keep per-cycle state.
func (p *Policy) isSpace(pod *guest.Pod) bool {
	v, ok := pod.Annotation(p.space.key)
	return ok && v == p.space.value
}

func (p *Policy) isEdge(n *guest.NodeInfo) bool {
	v, ok := n.Label(p.edge.key)
	return ok && v == p.edge.value
}

// PreFilter tells the host to skip Filter for pods that are not space
// workloads: they pass every node.
func (p *Policy) PreFilter(c *guest.Cycle) guest.Status {
	if !p.isSpace(c.Pod) {
		return guest.SkipPoint()
	}
	return guest.OK()
}

// Filter admits a space workload on edge nodes only, rejecting the others
// with UnschedulableAndUnresolvable (no preemption makes a node an edge
// node). Every other pod passes.
func (p *Policy) Filter(c *guest.Cycle, n *guest.NodeInfo) guest.Status {
	if !p.isSpace(c.Pod) {
		return guest.OK()
	}
	v, ok := n.Label(p.edge.key)
	switch {
	case !ok:
		return p.noLabel
	case v == p.edge.value:
		return guest.OK()
	case p.other.Code == 0 || v != p.otherValue:
		p.otherValue = v
		p.other = guest.RejectUnresolvable("%s: not an edge node: space workloads (annotation %s) need label %s, node has %s=%s", Name, p.space, p.edge, p.edge.key, v)
	}
	return p.other
}

// Score is 100 where the node's kind matches the pod's: edge nodes for
// space workloads, other nodes for everything else; 0 otherwise. Other
// pods so keep off edge nodes while any other node fits.
func (p *Policy) Score(c *guest.Cycle, n *guest.NodeInfo) (int64, guest.Status) {
	if p.isSpace(c.Pod) == p.isEdge(n) {
		return 100, guest.OK()
	}
	return 0, guest.OK()
}
