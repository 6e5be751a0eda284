package policy

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/convert"
	"github.com/wasmsched/wasmsched/host/engine"
)

// MaxPlacements bounds the placements one PlacementGenerate may propose: a
// pod-group cycle tries the group on each, so a policy proposing thousands
// would stall the scheduler.
const MaxPlacements = 256

// requestFor is the cycle's CycleRequest for p: the pod as p declared it,
// and the PodGroup when p wants pod groups. The group's field is appended
// to the pod's encoding (protobuf fields concatenate), encoded once.
func (c *Cycle) requestFor(p *Policy) []byte {
	req := c.request(p.view)
	if c.Group == nil || !p.info.GetWantsPodGroups() {
		return req
	}
	c.groupOnce.Do(func() { c.groupField = engine.Marshal(&abiv1.CycleRequest{PodGroup: c.Group}) })
	return append(req[:len(req):len(req)], c.groupField...)
}

// Group is a pod group as the placement calls see it: the PodGroup with
// its member counts and the pods the pod-group cycle places. Safe for
// concurrent use once made.
type Group struct {
	PodGroup *abiv1.PodGroup
	Pods     []*v1.Pod
	// Converted, when set, are Pods as the ABI has them (ConvertPods),
	// shared by the Groups of one pod-group cycle; otherwise each Group
	// converts Pods once.
	Converted []*abiv1.Pod

	once sync.Once
	msgs []*abiv1.Pod
}

func (g *Group) pods() []*abiv1.Pod {
	if g.Converted != nil {
		return g.Converted
	}
	g.once.Do(func() { g.msgs = ConvertPods(g.Pods) })
	return g.msgs
}

// ConvertPods converts a group's pods to the ABI. The messages are only
// read afterwards, so Groups may share them.
func ConvertPods(pods []*v1.Pod) []*abiv1.Pod {
	out := make([]*abiv1.Pod, len(pods))
	for i, p := range pods {
		out[i] = convert.Pod(p)
	}
	return out
}

// Placement is a named set of nodes.
type Placement struct {
	Name  string
	Nodes []fwk.NodeInfo
}

// Assignment is the node a pod of the group is assigned in a placement.
type Assignment struct {
	PodUID string
	Node   fwk.NodeInfo
}

// PlacementScore is one placement's score, by name.
type PlacementScore struct {
	Name  string
	Score int64
}

// placementMessage syncs the placement's nodes to m and returns the
// placement by handles, with the node of each handle.
func (p *Policy) placementMessage(m *member, name string, nodes []fwk.NodeInfo) (*abiv1.Placement, map[int32]fwk.NodeInfo, error) {
	hs, err := p.syncNodes(m, nodes)
	if err != nil {
		return nil, nil, err
	}
	byHandle := make(map[int32]fwk.NodeInfo, len(hs))
	for i, h := range hs {
		byHandle[h] = nodes[i]
	}
	return &abiv1.Placement{Name: name, NodeHandles: hs}, byHandle, nil
}

// GeneratePlacements asks the guest for candidate placements of the group
// within parent (POINT_PLACEMENT_GENERATE). A rejection comes back as the
// status, with no placements. An answer naming a node outside parent,
// naming a node twice in a placement, repeating or omitting a name, or
// proposing more than MaxPlacements placements is an error of the call.
func (p *Policy) GeneratePlacements(ctx context.Context, g *Group, parent Placement) ([]Placement, Status, error) {
	const call = "placement_generate"
	var (
		out []Placement
		st  Status
	)
	err := p.with(ctx, call, func(m *member) error {
		msg, byHandle, err := p.placementMessage(m, parent.Name, parent.Nodes)
		if err != nil {
			return err
		}
		code, err := m.in.Call(abiv1.Point_POINT_PLACEMENT_GENERATE, engine.Marshal(&abiv1.PlacementRequest{PodGroup: g.PodGroup, Pods: g.pods(), Parent: msg}))
		if err != nil {
			return err
		}
		r, err := m.in.Result(call)
		if err != nil {
			return err
		}
		st = Status{Code: code, Reasons: r.GetReasons()}
		switch code {
		case abiv1.Code_CODE_SUCCESS:
		case abiv1.Code_CODE_UNSCHEDULABLE, abiv1.Code_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE, abiv1.Code_CODE_ERROR:
			return nil
		default:
			return p.CallError(call, engine.KindInvalid, fmt.Errorf("placement_generate answered %s; want Success, Unschedulable, UnschedulableAndUnresolvable or Error", CodeName(code)))
		}
		out, err = placementsOf(r.GetPlacements(), byHandle)
		if err != nil {
			return p.CallError(call, engine.KindInvalid, err)
		}
		return nil
	})
	if err != nil {
		return nil, Status{}, err
	}
	return out, st, nil
}

// placementsOf checks the guest's placements and resolves their handles.
func placementsOf(pls []*abiv1.Placement, byHandle map[int32]fwk.NodeInfo) ([]Placement, error) {
	if len(pls) > MaxPlacements {
		return nil, fmt.Errorf("it proposed %d placements, more than the bound of %d", len(pls), MaxPlacements)
	}
	out := make([]Placement, len(pls))
	names := make(map[string]bool, len(pls))
	for i, pl := range pls {
		name := pl.GetName()
		switch {
		case name == "":
			return nil, fmt.Errorf("placement %d has no name", i)
		case names[name]:
			return nil, fmt.Errorf("placement %q is proposed twice", name)
		}
		names[name] = true
		seen := make(map[int32]bool, len(pl.GetNodeHandles()))
		nodes := make([]fwk.NodeInfo, 0, len(pl.GetNodeHandles()))
		for _, h := range pl.GetNodeHandles() {
			ni, ok := byHandle[h]
			switch {
			case !ok:
				return nil, fmt.Errorf("placement %q names node handle %d, which is not a node of the parent placement", name, h)
			case seen[h]:
				return nil, fmt.Errorf("placement %q names node %s twice", name, ni.Node().Name)
			}
			seen[h] = true
			nodes = append(nodes, ni)
		}
		out[i] = Placement{Name: name, Nodes: nodes}
	}
	return out, nil
}

// ScorePlacement asks the guest to score a feasible placement of the group
// (POINT_PLACEMENT_SCORE): the node each pod was assigned there.
func (p *Policy) ScorePlacement(ctx context.Context, g *Group, pl Placement, assignments []Assignment) (int64, Status, error) {
	const call = "placement_score"
	var (
		score int64
		st    Status
	)
	err := p.with(ctx, call, func(m *member) error {
		msg, _, err := p.placementMessage(m, pl.Name, pl.Nodes)
		if err != nil {
			return err
		}
		req := &abiv1.PlacementScoreRequest{PodGroup: g.PodGroup, Pods: g.pods(), Placement: msg}
		for _, a := range assignments {
			hs, err := p.syncNodes(m, []fwk.NodeInfo{a.Node})
			if err != nil {
				return err
			}
			req.Assignments = append(req.Assignments, &abiv1.Assignment{PodUid: a.PodUID, NodeHandle: hs[0]})
		}
		code, err := m.in.Call(abiv1.Point_POINT_PLACEMENT_SCORE, engine.Marshal(req))
		if err != nil {
			return err
		}
		r, err := m.in.Result(call)
		if err != nil {
			return err
		}
		score, st = r.GetPlacementScore(), Status{Code: code, Reasons: r.GetReasons()}
		return nil
	})
	return score, st, err
}

// NormalizePlacementScores asks the guest to rewrite the scores its
// PlacementScore gave (POINT_NORMALIZE_PLACEMENT_SCORE), in place. An
// answer that does not return every placement, in order, is an error.
func (p *Policy) NormalizePlacementScores(ctx context.Context, g *Group, scores []PlacementScore) (Status, error) {
	const call = "normalize_placement_score"
	var st Status
	err := p.with(ctx, call, func(m *member) error {
		req := &abiv1.PlacementScoreList{PodGroup: g.PodGroup, Scores: make([]*abiv1.PlacementScore, len(scores))}
		for i, s := range scores {
			req.Scores[i] = &abiv1.PlacementScore{Placement: s.Name, Score: s.Score}
		}
		code, err := m.in.Call(abiv1.Point_POINT_NORMALIZE_PLACEMENT_SCORE, engine.Marshal(req))
		if err != nil {
			return err
		}
		r, err := m.in.Result(call)
		if err != nil {
			return err
		}
		st = Status{Code: code, Reasons: r.GetReasons()}
		if code != abiv1.Code_CODE_SUCCESS {
			return nil
		}
		got := r.GetPlacementScores()
		if len(got) != len(scores) {
			return p.CallError(call, engine.KindInvalid, fmt.Errorf("it returned %d placement scores for %d placements", len(got), len(scores)))
		}
		for i, s := range got {
			if s.GetPlacement() != scores[i].Name {
				return p.CallError(call, engine.KindInvalid, fmt.Errorf("placement score %d is for %q, want %q", i, s.GetPlacement(), scores[i].Name))
			}
		}
		for i, s := range got {
			scores[i].Score = s.GetScore()
		}
		return nil
	})
	return st, err
}

// Nomination is a member of a pod group nominated to a node.
type Nomination struct {
	Pod  *v1.Pod
	Node string
}

// PodGroupPostFilter tells the guest that the pod-group cycle found no
// placement for the group (POINT_POD_GROUP_POST_FILTER), with every node
// of nodes synced and the policies' own rejection of the group, if any.
// The guest's verdict comes back as the status; with Success, its
// nominations. An answer other than Success, Unschedulable,
// UnschedulableAndUnresolvable or Error, nominations beside a verdict
// other than Success, or a nomination of a pod outside the group, of a
// member twice or to a node outside nodes, is an error of the call.
func (p *Policy) PodGroupPostFilter(ctx context.Context, g *Group, nodes []fwk.NodeInfo, rejection []string) ([]Nomination, Status, error) {
	const call = "pod_group_post_filter"
	var (
		out []Nomination
		st  Status
	)
	err := p.with(ctx, call, func(m *member) error {
		hs, err := p.syncNodes(m, nodes)
		if err != nil {
			return err
		}
		code, err := m.in.Call(abiv1.Point_POINT_POD_GROUP_POST_FILTER, engine.Marshal(&abiv1.PodGroupPostFilterRequest{PodGroup: g.PodGroup, Pods: g.pods(), NodeHandles: hs, Rejection: rejection}))
		if err != nil {
			return err
		}
		r, err := m.in.Result(call)
		if err != nil {
			return err
		}
		st = Status{Code: code, Reasons: r.GetReasons()}
		switch code {
		case abiv1.Code_CODE_SUCCESS:
		case abiv1.Code_CODE_UNSCHEDULABLE, abiv1.Code_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE, abiv1.Code_CODE_ERROR:
			if len(r.GetNominations()) > 0 {
				return p.CallError(call, engine.KindInvalid, fmt.Errorf("pod_group_post_filter answered %s with %d nominations; nominations come with Success only", CodeName(code), len(r.GetNominations())))
			}
			return nil
		default:
			return p.CallError(call, engine.KindInvalid, fmt.Errorf("pod_group_post_filter answered %s; want Success, Unschedulable, UnschedulableAndUnresolvable or Error", CodeName(code)))
		}
		out, err = nominationsOf(r.GetNominations(), g.Pods, nodes)
		if err != nil {
			return p.CallError(call, engine.KindInvalid, err)
		}
		return nil
	})
	if err != nil {
		return nil, Status{}, err
	}
	return out, st, nil
}

// nominationsOf checks the guest's nominations against the group's pods
// and the nodes of the call.
func nominationsOf(ns []*abiv1.Nomination, pods []*v1.Pod, nodes []fwk.NodeInfo) ([]Nomination, error) {
	byUID := make(map[string]*v1.Pod, len(pods))
	for _, pod := range pods {
		byUID[string(pod.UID)] = pod
	}
	known := make(map[string]bool, len(nodes))
	for _, ni := range nodes {
		known[ni.Node().Name] = true
	}
	out := make([]Nomination, 0, len(ns))
	seen := make(map[string]bool, len(ns))
	for _, n := range ns {
		pod := byUID[n.GetPodUid()]
		switch {
		case pod == nil:
			return nil, fmt.Errorf("it nominated pod %q, which is not a member the cycle tried", n.GetPodUid())
		case seen[n.GetPodUid()]:
			return nil, fmt.Errorf("it nominated pod %s/%s twice", pod.Namespace, pod.Name)
		case !known[n.GetNodeName()]:
			return nil, fmt.Errorf("it nominated pod %s/%s to node %q, which is not a node of the scheduler's snapshot", pod.Namespace, pod.Name, n.GetNodeName())
		}
		seen[n.GetPodUid()] = true
		out = append(out, Nomination{Pod: pod, Node: n.GetNodeName()})
	}
	return out, nil
}
