package guest

import (
	"bytes"
	"slices"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// Pod groups (workload-aware scheduling, Kubernetes 1.36 and later): a pod
// may belong to a PodGroup (Pod.PodGroupName), which the scheduler places
// as a whole in a pod-group cycle. A policy reads the group of the pod it
// judges with Cycle.PodGroup (Policy.WantsPodGroups), learns that its
// Reserve is speculative with Cycle.GroupCycle, and may propose and judge
// the placements of a whole group (Policy.PlacementGenerate,
// PlacementScore, NormalizePlacementScore).

// Scheduling policies of a PodGroup (PodGroup.Policy).
const (
	GroupBasic = "basic"
	GroupGang  = "gang"
)

// PodGroup is a PodGroup object and the scheduler's count of its members,
// read through its methods. It is read-only. NewPodGroup wraps a message in
// tests.
type PodGroup struct{ msg *abiv1.PodGroup }

// NewPodGroup wraps a PodGroup message, as the host sends it, in a view; nil
// for a nil message.
func NewPodGroup(m *abiv1.PodGroup) *PodGroup {
	if m == nil {
		return nil
	}
	return &PodGroup{msg: m}
}

// Message returns the group's wire message (abi/v1). It is read-only.
func (g *PodGroup) Message() *abiv1.PodGroup { return g.msg }

// Name returns the PodGroup's name.
func (g *PodGroup) Name() string { return g.msg.GetName() }

// Namespace returns the PodGroup's namespace, which is its pods'.
func (g *PodGroup) Namespace() string { return g.msg.GetNamespace() }

// Key returns "namespace/name".
func (g *PodGroup) Key() string { return g.msg.GetNamespace() + "/" + g.msg.GetName() }

// Label returns the value of one of the PodGroup's labels and whether it is
// set.
func (g *PodGroup) Label(key string) (string, bool) { return Lookup(g.msg.GetLabels(), key) }

// Policy returns GroupBasic or GroupGang.
func (g *PodGroup) Policy() string { return g.msg.GetPolicy() }

// IsGang reports a gang: at least MinCount members are placed together, or
// none.
func (g *PodGroup) IsGang() bool { return g.msg.GetPolicy() == GroupGang }

// MinCount returns a gang's minimum number of members placed together (0
// for a basic group).
func (g *PodGroup) MinCount() int { return int(g.msg.GetMinCount()) }

// TopologyKeys returns the keys of the group's topology constraint: its
// members run on nodes sharing the value of each.
func (g *PodGroup) TopologyKeys() []string { return g.msg.GetTopologyKeys() }

// Priority returns the group's priority.
func (g *PodGroup) Priority() int32 { return g.msg.GetPriority() }

// WorkloadName returns the Workload the group belongs to, or "".
func (g *PodGroup) WorkloadName() string { return g.msg.GetWorkloadName() }

// Scheduled, Assumed and Pending count the members: bound, assumed by the
// scheduler, and not yet placed.
func (g *PodGroup) Scheduled() int { return int(g.msg.GetScheduled()) }
func (g *PodGroup) Assumed() int   { return int(g.msg.GetAssumed()) }
func (g *PodGroup) Pending() int   { return int(g.msg.GetPending()) }

// MemberNodes returns the nodes the scheduled and assumed members run on,
// sorted, each once.
func (g *PodGroup) MemberNodes() []string { return g.msg.GetMemberNodes() }

// PodGroupName returns the PodGroup the pod belongs to
// (spec.schedulingGroup.podGroupName, in its namespace), or "".
func (p *Pod) PodGroupName() string { return p.msg.GetPodGroup() }

// PodGroup returns the PodGroup of the cycle's pod, or nil when the pod
// names none, the scheduler does not know it yet, or the policy did not set
// Policy.WantsPodGroups.
func (c *Cycle) PodGroup() *PodGroup { return c.group }

// GroupCycle reports whether the cycle is part of a pod-group scheduling
// cycle, and the placement being tried (its name as PlacementGenerate gave
// it; "" when the group is tried on all nodes or the placement is not this
// policy's). In such a cycle Reserve and Permit are speculative: the
// scheduler undoes them with Unreserve for every placement it does not
// choose, and for every member of a group that does not fit.
func (c *Cycle) GroupCycle() (placement string, ok bool) {
	if c.groupCycle == nil {
		return "", false
	}
	return c.groupCycle.GetPlacement(), true
}

// Group is a pod group as a placement call sees it: the PodGroup and the
// members the cycle places. Each call gets its own Group and Pods slice;
// the PodGroup and Pod views in it are read-only and shared by the calls
// of one pod-group cycle (the group is decoded once, not for every
// placement scored).
type Group struct {
	// PodGroup is the group's object and member counts.
	PodGroup *PodGroup
	// Pods are the members this cycle places, in the scheduler's order.
	Pods []*Pod

	in *instance
}

// NewGroup returns a group of pods, as a policy's native tests need it.
func NewGroup(pg *PodGroup, pods []*Pod) *Group { return &Group{PodGroup: pg, Pods: pods} }

// Requests returns the sum of one resource's requests over the group's pods
// (see Pod.Request for the names).
func (g *Group) Requests(name string) int64 {
	var sum int64
	for _, p := range g.Pods {
		sum += p.Request(name)
	}
	return sum
}

// Placement is a set of nodes a group may be placed within. A policy's
// PlacementGenerate returns placements whose nodes come from the parent
// placement it receives.
type Placement struct {
	// Name identifies the placement within the cycle (the scheduler's logs
	// and Cycle.GroupCycle show it); names must be unique.
	Name  string
	Nodes []*NodeInfo
}

// Assignment is the node a pod was assigned to in a feasible placement.
type Assignment struct {
	Pod  *Pod
	Node *NodeInfo
}

// PlacementAssignment is a feasible placement and the node each pod of the
// group was assigned to there, for PlacementScore.
type PlacementAssignment struct {
	Placement   Placement
	Assignments []Assignment
}

// PlacementScore is one placement's score, by name, for
// NormalizePlacementScore.
type PlacementScore struct {
	Placement string
	Score     int64
}

// decodeGroup turns a message's group and pods into a Group.
func (in *instance) decodeGroup(pg *abiv1.PodGroup, pods []*abiv1.Pod) *Group {
	g := &Group{PodGroup: NewPodGroup(pg), Pods: make([]*Pod, len(pods)), in: in}
	for i, p := range pods {
		g.Pods[i] = &Pod{msg: p}
	}
	return g
}

// groupCache is the group of the last placement call, decoded, and the
// bytes it was decoded from. The calls of one pod-group cycle (a
// PlacementGenerate, then a PlacementScore for each feasible placement)
// send the same group and pods, which are decoded once rather than in each
// call: a gang's pods are most of a PlacementScore request.
type groupCache struct {
	enc   []byte // the pod_group and pods fields the views were decoded from
	group *PodGroup
	pods  []*Pod
	byUID map[string]*Pod // pods by UID, made on first use
	// next and rest are the fields of the request being read: its group
	// and the others.
	next, rest []byte
}

// splitGroup reads the first n bytes the host wrote, a request that
// carries a group in fields 1 (pod_group) and 2 (pods), as every placement
// request does. It returns the group, decoded only when those fields differ
// from the last call's, and the request's other fields, for the caller to
// decode into the request's own message. The Group is new; its PodGroup
// and Pods are the views of every call with the same group.
func (in *instance) splitGroup(n uint32) (*Group, []byte, error) {
	req, err := in.request(n)
	if err != nil {
		return nil, nil, err
	}
	c := &in.groups
	c.next, c.rest = c.next[:0], c.rest[:0]
	for b := req; len(b) > 0; {
		tag, field, _, err := nextField(b)
		if err != nil {
			return nil, nil, err
		}
		b = b[len(field):]
		if f := tag >> 3; f == 1 || f == 2 {
			c.next = append(c.next, field...)
		} else {
			c.rest = append(c.rest, field...)
		}
	}
	if c.enc == nil || !bytes.Equal(c.next, c.enc) {
		// PlacementRequest's fields 1 and 2 are every group request's.
		var m abiv1.PlacementRequest
		if err := m.UnmarshalVT(c.next); err != nil {
			c.enc = nil
			return nil, nil, err
		}
		g := in.decodeGroup(m.GetPodGroup(), m.GetPods())
		c.enc, c.next = c.next, c.enc
		c.group, c.pods, c.byUID = g.PodGroup, g.Pods, nil
	}
	return &Group{PodGroup: c.group, Pods: slices.Clone(c.pods), in: in}, c.rest, nil
}

// podByUID returns the member of the cached group with the UID, or nil.
func (in *instance) podByUID(uid string) *Pod {
	c := &in.groups
	if c.byUID == nil {
		c.byUID = make(map[string]*Pod, len(c.pods))
		for _, p := range c.pods {
			c.byUID[p.UID()] = p
		}
	}
	return c.byUID[uid]
}

// placementNodes resolves a placement's handles to resident nodes; ok is
// false, with the failure recorded, when one was never synced.
func (in *instance) placementNodes(m *abiv1.Placement) (Placement, uint32) {
	pl := Placement{Name: m.GetName(), Nodes: make([]*NodeInfo, len(m.GetNodeHandles()))}
	for i, h := range m.GetNodeHandles() {
		n := in.node(uint32(h))
		if n == nil {
			return Placement{}, in.unknownNode(uint32(h))
		}
		pl.Nodes[i] = n
	}
	return pl, 0
}

// placementGenerate handles wasmsched_call with POINT_PLACEMENT_GENERATE.
func (in *instance) placementGenerate(n uint32) uint32 {
	var m abiv1.PlacementRequest
	g, rest, err := in.splitGroup(n)
	if err == nil {
		err = m.UnmarshalVT(rest)
	}
	if err != nil {
		return in.fail(Error, "decode PlacementRequest: "+err.Error())
	}
	parent, code := in.placementNodes(m.GetParent())
	if code != 0 {
		return code
	}
	p := in.policy
	if p.PlacementGenerate == nil {
		return in.fail(Error, "the policy does not implement PlacementGenerate")
	}
	pls, s := p.PlacementGenerate(g, parent)
	in.setResult(s)
	if s.Code != Success {
		return uint32(s.Code)
	}
	in.markParent(m.Parent.NodeHandles)
	for _, pl := range pls {
		out := &abiv1.Placement{Name: pl.Name, NodeHandles: make([]int32, len(pl.Nodes))}
		for i, node := range pl.Nodes {
			if !in.inParent(node) {
				return in.fail(Error, "placement "+pl.Name+" holds a node that is not one of the parent placement's")
			}
			out.NodeHandles[i] = node.handle
		}
		in.result.Placements = append(in.result.Placements, out)
	}
	return uint32(Success)
}

// markParent marks the handles of a PlacementGenerate's parent placement,
// all of resident nodes (placementNodes checked them), for inParent: a
// stamp per handle in a slice kept across calls, rather than a map of
// thousands of nodes built for every gang.
func (in *instance) markParent(handles []int32) {
	if len(in.marks) < len(in.nodes) {
		in.marks = make([]uint32, len(in.nodes))
		in.mark = 0
	}
	in.mark++
	if in.mark == 0 { // wrapped: old stamps could match again
		clear(in.marks)
		in.mark = 1
	}
	for _, h := range handles {
		in.marks[h] = in.mark
	}
}

// inParent reports whether node is one of the nodes of the parent
// placement markParent marked: the view this call was given for it, not an
// older one of the same node or one the policy made itself.
func (in *instance) inParent(node *NodeInfo) bool {
	h := node.handle
	return h >= 0 && int(h) < len(in.marks) && in.marks[h] == in.mark && in.nodes[h] == node
}

// placementScore handles wasmsched_call with POINT_PLACEMENT_SCORE.
func (in *instance) placementScore(n uint32) uint32 {
	var m abiv1.PlacementScoreRequest
	g, rest, err := in.splitGroup(n)
	if err == nil {
		err = m.UnmarshalVT(rest)
	}
	if err != nil {
		return in.fail(Error, "decode PlacementScoreRequest: "+err.Error())
	}
	pl, code := in.placementNodes(m.GetPlacement())
	if code != 0 {
		return code
	}
	pa := &PlacementAssignment{Placement: pl, Assignments: make([]Assignment, len(m.GetAssignments()))}
	for i, a := range m.GetAssignments() {
		pod := in.podByUID(a.GetPodUid())
		if pod == nil {
			return in.fail(Error, "assignment of pod "+a.GetPodUid()+", which is not in the group")
		}
		node := in.node(uint32(a.GetNodeHandle()))
		if node == nil {
			return in.unknownNode(uint32(a.GetNodeHandle()))
		}
		pa.Assignments[i] = Assignment{Pod: pod, Node: node}
	}
	p := in.policy
	if p.PlacementScore == nil {
		return in.fail(Error, "the policy does not implement PlacementScore")
	}
	v, s := p.PlacementScore(g, pa)
	in.setResult(s)
	in.result.PlacementScore = v
	return uint32(s.Code)
}

// normalizePlacementScore handles wasmsched_call with
// POINT_NORMALIZE_PLACEMENT_SCORE.
func (in *instance) normalizePlacementScore(n uint32) uint32 {
	var m abiv1.PlacementScoreList
	if err := in.decode(n, &m); err != nil {
		return in.fail(Error, "decode PlacementScoreList: "+err.Error())
	}
	scores := make([]PlacementScore, len(m.GetScores()))
	for i, sc := range m.GetScores() {
		scores[i] = PlacementScore{Placement: sc.GetPlacement(), Score: sc.GetScore()}
	}
	s := OK()
	if p := in.policy; p.NormalizePlacementScore != nil {
		s = p.NormalizePlacementScore(in.decodeGroup(m.GetPodGroup(), nil), scores)
	}
	in.setResult(s)
	for i, sc := range scores {
		m.Scores[i].Score = sc.Score
	}
	in.result.PlacementScores = m.Scores
	return uint32(s.Code)
}

// GroupFailure is what a PodGroupPostFilter knows of a pod-group cycle
// that found no placement for the group.
type GroupFailure struct {
	// Nodes are the nodes of the scheduler's snapshot.
	Nodes []*NodeInfo
	// Rejection holds the reasons the policies' PlacementGenerate turned
	// the group away with in this cycle, if it did.
	Rejection []string
}

// Nomination nominates a member of a pod group to a node
// (PodGroupPostFilter).
type Nomination struct {
	Pod  *Pod
	Node string
}

// podGroupPostFilter handles wasmsched_call with
// POINT_POD_GROUP_POST_FILTER.
func (in *instance) podGroupPostFilter(n uint32) uint32 {
	var m abiv1.PodGroupPostFilterRequest
	g, rest, err := in.splitGroup(n)
	if err == nil {
		err = m.UnmarshalVT(rest)
	}
	if err != nil {
		return in.fail(Error, "decode PodGroupPostFilterRequest: "+err.Error())
	}
	f := &GroupFailure{Nodes: make([]*NodeInfo, len(m.GetNodeHandles())), Rejection: m.GetRejection()}
	for i, h := range m.GetNodeHandles() {
		node := in.node(uint32(h))
		if node == nil {
			return in.unknownNode(uint32(h))
		}
		f.Nodes[i] = node
	}
	p := in.policy
	if p.PodGroupPostFilter == nil {
		return in.fail(Error, "the policy does not implement PodGroupPostFilter")
	}
	noms, s := p.PodGroupPostFilter(g, f)
	in.setResult(s)
	if s.Code != Success {
		return uint32(s.Code)
	}
	members := make(map[*Pod]bool, len(g.Pods))
	for _, pod := range g.Pods {
		members[pod] = true
	}
	for _, nm := range noms {
		if nm.Pod == nil || !members[nm.Pod] {
			return in.fail(Error, "a nomination names a pod that is not one of the group's")
		}
		in.result.Nominations = append(in.result.Nominations, &abiv1.Nomination{PodUid: nm.Pod.UID(), NodeName: nm.Node})
	}
	return uint32(Success)
}
