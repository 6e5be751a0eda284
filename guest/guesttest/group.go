package guesttest

import (
	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
)

// PodGroup makes the pod a member of the named PodGroup
// (spec.schedulingGroup.podGroupName).
func (p *PodWrapper) PodGroup(name string) *PodWrapper { p.podGroup = name; return p }

// PodGroupWrapper describes a PodGroup. Its setters return the wrapper, so
// calls chain; Obj builds a new message each time.
type PodGroupWrapper struct {
	m *abiv1.PodGroup
}

// MakePodGroup starts a basic PodGroup in namespace with name.
func MakePodGroup(namespace, name string) *PodGroupWrapper {
	return &PodGroupWrapper{m: &abiv1.PodGroup{Namespace: namespace, Name: name, Policy: guest.GroupBasic}}
}

// Gang makes the group a gang of at least minCount members.
func (g *PodGroupWrapper) Gang(minCount int) *PodGroupWrapper {
	g.m.Policy, g.m.MinCount = guest.GroupGang, int32(minCount)
	return g
}

// Topology adds a topology constraint key.
func (g *PodGroupWrapper) Topology(key string) *PodGroupWrapper {
	g.m.TopologyKeys = append(g.m.TopologyKeys, key)
	return g
}

// Members sets the counts of members scheduled, assumed and pending.
func (g *PodGroupWrapper) Members(scheduled, assumed, pending int) *PodGroupWrapper {
	g.m.Scheduled, g.m.Assumed, g.m.Pending = int32(scheduled), int32(assumed), int32(pending)
	return g
}

// MemberNodes sets the nodes the scheduled and assumed members run on.
func (g *PodGroupWrapper) MemberNodes(nodes ...string) *PodGroupWrapper {
	g.m.MemberNodes = append([]string(nil), nodes...)
	return g
}

// Obj returns the group's view.
func (g *PodGroupWrapper) Obj() *guest.PodGroup {
	m := &abiv1.PodGroup{}
	b, _ := g.m.MarshalVT()
	_ = m.UnmarshalVT(b)
	return guest.NewPodGroup(m)
}

// Failure is what a PodGroupPostFilter receives after a pod-group cycle
// found no placement: the scheduler's nodes and, if the policies'
// PlacementGenerate turned the group away, its reasons.
func Failure(nodes []*guest.NodeInfo, rejection ...string) *guest.GroupFailure {
	return &guest.GroupFailure{Nodes: nodes, Rejection: rejection}
}

// Nominated returns a PodGroupPostFilter's nominations as pod name ->
// node, for comparing with what a test expects.
func Nominated(ns []guest.Nomination) map[string]string {
	out := make(map[string]string, len(ns))
	for _, n := range ns {
		out[n.Pod.Name()] = n.Node
	}
	return out
}
