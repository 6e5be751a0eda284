package guest

import abiv1 "github.com/wasmsched/wasmsched/abi/v1"

// Cycle is one scheduling cycle of one pod, as one instance sees it. It is
// created when the host starts the cycle on the instance and lives until the
// next cycle starts there.
type Cycle struct {
	// ID is the host's number for the cycle.
	ID uint64
	// Pod is the pod being scheduled.
	Pod *Pod
	// State is free for the policy: PreFilter typically computes something
	// once per cycle and Filter and Score read it.
	State any

	// group and groupCycle: the pod's PodGroup and the pod-group cycle
	// the cycle belongs to (group.go).
	group      *PodGroup
	groupCycle *abiv1.GroupCycle

	restricted bool
	restrict   []string
	// scoresFinal: SkipNormalizeScore was called.
	scoresFinal bool
	// in holds the nodes EachNode and NodeByName read: the instance's
	// resident snapshot, or for a cycle from NewCycle, its own.
	in *instance
}

// NewCycle returns a cycle of pod over nodes, as a policy's native tests
// need it: EachNode and NodeByName see exactly nodes, in their order. The
// SDK makes the cycles of a running policy, over the nodes the instance
// holds. ID is 0 and State nil.
func NewCycle(pod *Pod, nodes []*NodeInfo) *Cycle {
	return &Cycle{Pod: pod, in: &instance{nodes: nodes}}
}

// RestrictNodes narrows, from PreFilter, the nodes the scheduler evaluates
// for this pod to the named ones. Calling it with no names leaves no node.
func (c *Cycle) RestrictNodes(names ...string) {
	c.restricted = true
	c.restrict = append(c.restrict, names...)
}

// SkipNormalizeScore says, from PreFilter, that this pod's raw scores are
// final (each in 0..100): NormalizeScore would leave them as they are, so
// it is not called in this cycle, and the scheduler does not send it the
// scored nodes. A policy that normalises only some pods (those requesting
// a GPU, say) saves a call over every scored node for the others; when the
// scheduler batches pods, each batched pod rescores the hundreds of nodes
// it cached.
func (c *Cycle) SkipNormalizeScore() { c.scoresFinal = true }

// EachNode calls fn for every node resident in the instance, in handle
// order, until fn returns false. The data is current for the cycle when the
// policy sets Policy.WantsAllNodes. A Cycle built as a literal has no
// nodes.
func (c *Cycle) EachNode(fn func(n *NodeInfo) bool) {
	if c.in == nil {
		return
	}
	for _, n := range c.in.nodes {
		if n != nil && !fn(n) {
			return
		}
	}
}

// NodeByName returns the resident node with that name, or nil. It scans the
// snapshot: use it sparingly.
func (c *Cycle) NodeByName(name string) *NodeInfo {
	if c.in == nil {
		return nil
	}
	for _, n := range c.in.nodes {
		if n != nil && n.Name() == name {
			return n
		}
	}
	return nil
}
