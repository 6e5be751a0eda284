package guest

import (
	"slices"
	"strings"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// rackPolicy proposes one placement per value of the "rack" label among the
// parent's nodes, scores a placement by how few nodes the group uses, and
// records in Reserve whether the cycle is a pod-group cycle.
func rackPolicy(reserved *[]string) *Policy {
	return &Policy{
		Name:           "racks",
		WantsPodGroups: true,
		Reserve: func(c *Cycle, n *NodeInfo) Status {
			pl, ok := c.GroupCycle()
			g := "-"
			if pg := c.PodGroup(); pg != nil {
				g = pg.Key()
			}
			*reserved = append(*reserved, c.Pod.PodGroupName()+"|"+g+"|"+pl+"|"+map[bool]string{true: "group", false: "pod"}[ok])
			return OK()
		},
		PlacementGenerate: func(g *Group, parent Placement) ([]Placement, Status) {
			if !g.PodGroup.IsGang() || g.PodGroup.MinCount() != 2 || len(g.Pods) != 2 {
				return nil, Errorf("racks: group %s: gang %v of %d with %d pods", g.PodGroup.Key(), g.PodGroup.IsGang(), g.PodGroup.MinCount(), len(g.Pods))
			}
			var out []Placement
			idx := map[string]int{}
			for _, n := range parent.Nodes {
				r, _ := n.Label("rack")
				if r == "" {
					continue
				}
				i, ok := idx[r]
				if !ok {
					i = len(out)
					idx[r] = i
					out = append(out, Placement{Name: "rack=" + r})
				}
				out[i].Nodes = append(out[i].Nodes, n)
			}
			if len(out) == 0 {
				return nil, Reject("racks: no node has a rack label")
			}
			return out, OK()
		},
		PlacementScore: func(g *Group, p *PlacementAssignment) (int64, Status) {
			used := map[string]bool{}
			for _, a := range p.Assignments {
				used[a.Node.Name()] = true
			}
			return int64(100 - len(used)), OK()
		},
		NormalizePlacementScore: func(g *Group, scores []PlacementScore) Status {
			for i := range scores {
				scores[i].Score *= 2
			}
			return OK()
		},
	}
}

func sendMsg(t testing.TB, m marshaler) uint32 {
	t.Helper()
	b := marshal(t, m)
	copy(inst.buffer(uint32(len(b))), b)
	return uint32(len(b))
}

// TestGroupCalls: a policy declares the group points and wants_pod_groups,
// proposes placements by handle from the parent's nodes, scores an
// assignment, normalises scores, and sees its cycle's group and placement.
func TestGroupCalls(t *testing.T) {
	var reserved []string
	inst = &instance{policy: rackPolicy(&reserved)}
	if code := inst.init(sendMsg(t, &abiv1.InitRequest{HostAbiVersion: ABIVersion})); code != uint32(Success) {
		t.Fatalf("init answered %d", code)
	}
	for _, pt := range []abiv1.Point{abiv1.Point_POINT_PLACEMENT_GENERATE, abiv1.Point_POINT_PLACEMENT_SCORE, abiv1.Point_POINT_NORMALIZE_PLACEMENT_SCORE, abiv1.Point_POINT_RESERVE} {
		if inst.info.Points&(1<<uint(pt)) == 0 {
			t.Errorf("points %b lack %v", inst.info.Points, pt)
		}
	}
	if !inst.info.WantsPodGroups {
		t.Error("PolicyInfo.wants_pod_groups is not set")
	}
	node := func(h int32, name, rack string) *abiv1.NodeInfo {
		n := &abiv1.NodeInfo{Handle: h, Generation: 1, Node: &abiv1.Node{Name: name}}
		if rack != "" {
			n.Node.Labels = []*abiv1.KeyValue{{Key: "rack", Value: rack}}
		}
		return n
	}
	sync := &abiv1.NodeSync{Upserts: []*abiv1.NodeInfo{node(0, "a1", "a"), node(1, "b1", "b"), node(2, "a2", "a"), node(3, "x", "")}}
	if code := inst.sync(sendMsg(t, sync)); code != uint32(Success) {
		t.Fatalf("sync answered %d", code)
	}
	pg := &abiv1.PodGroup{Namespace: "ml", Name: "train", Policy: "gang", MinCount: 2, TopologyKeys: []string{"rack"}}
	pods := []*abiv1.Pod{{Name: "w0", Namespace: "ml", Uid: "u0", PodGroup: "train"}, {Name: "w1", Namespace: "ml", Uid: "u1", PodGroup: "train"}}

	// No cycle is needed: placement calls come before any pod's cycle.
	code, r := callPoint(t, abiv1.Point_POINT_PLACEMENT_GENERATE, &abiv1.PlacementRequest{PodGroup: pg, Pods: pods,
		Parent: &abiv1.Placement{NodeHandles: []int32{0, 1, 2, 3}}})
	if code != Success {
		t.Fatalf("PlacementGenerate answered %d %v", code, r.Reasons)
	}
	var got []string
	for _, p := range r.Placements {
		got = append(got, p.Name+":"+itoas(p.NodeHandles))
	}
	if want := "rack=a:0,2 rack=b:1"; strings.Join(got, " ") != want {
		t.Errorf("placements %q, want %q", strings.Join(got, " "), want)
	}

	// Within a parent of unracked nodes only: a rejection with the reason.
	code, r = callPoint(t, abiv1.Point_POINT_PLACEMENT_GENERATE, &abiv1.PlacementRequest{PodGroup: pg, Pods: pods, Parent: &abiv1.Placement{NodeHandles: []int32{3}}})
	if code != Unschedulable || len(r.Placements) != 0 || r.Reasons[0] != "racks: no node has a rack label" {
		t.Errorf("PlacementGenerate on unracked nodes: %d %v %v", code, r.Placements, r.Reasons)
	}
	// A parent naming a node never synced is an error naming the handle.
	code, r = callPoint(t, abiv1.Point_POINT_PLACEMENT_GENERATE, &abiv1.PlacementRequest{PodGroup: pg, Pods: pods, Parent: &abiv1.Placement{NodeHandles: []int32{7}}})
	if code != Error || r.Reasons[0] != "node handle 7 was never synced" {
		t.Errorf("PlacementGenerate on an unknown node: %d %v", code, r.Reasons)
	}

	code, r = callPoint(t, abiv1.Point_POINT_PLACEMENT_SCORE, &abiv1.PlacementScoreRequest{PodGroup: pg, Pods: pods,
		Placement:   &abiv1.Placement{Name: "rack=a", NodeHandles: []int32{0, 2}},
		Assignments: []*abiv1.Assignment{{PodUid: "u0", NodeHandle: 0}, {PodUid: "u1", NodeHandle: 0}}})
	if code != Success || r.PlacementScore != 99 {
		t.Errorf("PlacementScore answered %d, score %d; want 1 (Success), 99", code, r.PlacementScore)
	}
	code, r = callPoint(t, abiv1.Point_POINT_PLACEMENT_SCORE, &abiv1.PlacementScoreRequest{PodGroup: pg, Pods: pods,
		Placement:   &abiv1.Placement{Name: "rack=a", NodeHandles: []int32{0, 2}},
		Assignments: []*abiv1.Assignment{{PodUid: "stranger", NodeHandle: 0}}})
	if code != Error || r.Reasons[0] != "assignment of pod stranger, which is not in the group" {
		t.Errorf("PlacementScore of a stranger: %d %v", code, r.Reasons)
	}

	code, r = callPoint(t, abiv1.Point_POINT_NORMALIZE_PLACEMENT_SCORE, &abiv1.PlacementScoreList{PodGroup: pg,
		Scores: []*abiv1.PlacementScore{{Placement: "rack=a", Score: 99}, {Placement: "rack=b", Score: 98}}})
	if code != Success || len(r.PlacementScores) != 2 || r.PlacementScores[0].Score != 198 || r.PlacementScores[1].Placement != "rack=b" || r.PlacementScores[1].Score != 196 {
		t.Errorf("NormalizePlacementScore answered %d %v", code, r.PlacementScores)
	}

	// A cycle of a group member, within the group's cycle on rack=a, then a
	// plain pod's.
	if code := inst.startCycle(sendMsg(t, &abiv1.CycleRequest{Cycle: 1, Pod: pods[0], PodGroup: pg, GroupCycle: &abiv1.GroupCycle{Placement: "rack=a"}})); code != uint32(Success) {
		t.Fatalf("cycle answered %d", code)
	}
	if code, r := callPoint(t, abiv1.Point_POINT_RESERVE, &abiv1.NodeHandleRequest{NodeHandle: 0}); code != Success {
		t.Fatalf("Reserve answered %d %v", code, r.Reasons)
	}
	if code := inst.startCycle(sendMsg(t, &abiv1.CycleRequest{Cycle: 2, Pod: &abiv1.Pod{Name: "solo", Uid: "s"}})); code != uint32(Success) {
		t.Fatalf("cycle answered %d", code)
	}
	callPoint(t, abiv1.Point_POINT_RESERVE, &abiv1.NodeHandleRequest{NodeHandle: 1})
	if want := "train|ml/train|rack=a|group |-||pod"; strings.Join(reserved, " ") != want {
		t.Errorf("Reserve saw %q, want %q", strings.Join(reserved, " "), want)
	}
}

// TestGroupPointsUnimplemented: a placement call to a policy without the
// point is an error naming it, never an empty success.
func TestGroupPointsUnimplemented(t *testing.T) {
	inst = &instance{policy: &Policy{Name: "plain", Filter: func(*Cycle, *NodeInfo) Status { return OK() }}}
	if code := inst.init(sendMsg(t, &abiv1.InitRequest{HostAbiVersion: ABIVersion})); code != uint32(Success) {
		t.Fatalf("init answered %d", code)
	}
	if inst.info.WantsPodGroups || inst.info.Points&(1<<uint(abiv1.Point_POINT_PLACEMENT_GENERATE)) != 0 {
		t.Errorf("a plain policy declares groups: %v", inst.info)
	}
	code, r := callPoint(t, abiv1.Point_POINT_PLACEMENT_GENERATE, &abiv1.PlacementRequest{Parent: &abiv1.Placement{}})
	if code != Error || r.Reasons[0] != "the policy does not implement PlacementGenerate" {
		t.Errorf("PlacementGenerate answered %d %v", code, r.Reasons)
	}
}

func itoas(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = itoa(int64(x))
	}
	return strings.Join(s, ",")
}

// TestPodGroupPostFilter: a policy declares PodGroupPostFilter, sees the
// group, the snapshot's nodes and the rejection, and answers with reasons
// or nominations by the members' UIDs; a nomination of a stranger is an
// error, as is a request naming a node never synced.
func TestPodGroupPostFilter(t *testing.T) {
	var seen string
	inst = &instance{policy: &Policy{Name: "why", PodGroupPostFilter: func(g *Group, f *GroupFailure) ([]Nomination, Status) {
		var names []string
		for _, n := range f.Nodes {
			names = append(names, n.Name())
		}
		seen = g.PodGroup.Key() + "|" + strings.Join(names, ",") + "|" + strings.Join(f.Rejection, ";")
		switch g.PodGroup.Name() {
		case "nominate":
			return []Nomination{{Pod: g.Pods[1], Node: f.Nodes[0].Name()}}, OK()
		case "stranger":
			return []Nomination{{Pod: &Pod{msg: &abiv1.Pod{Uid: "x"}}, Node: "a1"}}, OK()
		}
		return nil, Reject("why: no rack holds %d pods", len(g.Pods))
	}}}
	if code := inst.init(sendMsg(t, &abiv1.InitRequest{HostAbiVersion: ABIVersion})); code != uint32(Success) {
		t.Fatalf("init answered %d", code)
	}
	if inst.info.Points != 1<<uint(abiv1.Point_POINT_POD_GROUP_POST_FILTER) {
		t.Errorf("points %b, want only POINT_POD_GROUP_POST_FILTER", inst.info.Points)
	}
	sync := &abiv1.NodeSync{Upserts: []*abiv1.NodeInfo{{Handle: 0, Generation: 1, Node: &abiv1.Node{Name: "a1"}}, {Handle: 1, Generation: 1, Node: &abiv1.Node{Name: "b1"}}}}
	if code := inst.sync(sendMsg(t, sync)); code != uint32(Success) {
		t.Fatalf("sync answered %d", code)
	}
	pods := []*abiv1.Pod{{Name: "w0", Namespace: "ml", Uid: "u0"}, {Name: "w1", Namespace: "ml", Uid: "u1"}}
	req := func(name string, handles ...int32) *abiv1.PodGroupPostFilterRequest {
		return &abiv1.PodGroupPostFilterRequest{PodGroup: &abiv1.PodGroup{Namespace: "ml", Name: name}, Pods: pods, NodeHandles: handles, Rejection: []string{"too big"}}
	}
	code, r := callPoint(t, abiv1.Point_POINT_POD_GROUP_POST_FILTER, req("train", 0, 1))
	if code != Unschedulable || strings.Join(r.Reasons, ";") != "why: no rack holds 2 pods" || len(r.Nominations) != 0 {
		t.Errorf("PodGroupPostFilter answered %d %v %v", code, r.Reasons, r.Nominations)
	}
	if want := "ml/train|a1,b1|too big"; seen != want {
		t.Errorf("the policy saw %q, want %q", seen, want)
	}
	code, r = callPoint(t, abiv1.Point_POINT_POD_GROUP_POST_FILTER, req("nominate", 1, 0))
	if code != Success || len(r.Nominations) != 1 || r.Nominations[0].PodUid != "u1" || r.Nominations[0].NodeName != "b1" {
		t.Errorf("PodGroupPostFilter nominating answered %d %v", code, r.Nominations)
	}
	code, r = callPoint(t, abiv1.Point_POINT_POD_GROUP_POST_FILTER, req("stranger", 0))
	if code != Error || r.Reasons[0] != "a nomination names a pod that is not one of the group's" {
		t.Errorf("nominating a stranger answered %d %v", code, r.Reasons)
	}
	code, r = callPoint(t, abiv1.Point_POINT_POD_GROUP_POST_FILTER, req("train", 5))
	if code != Error || r.Reasons[0] != "node handle 5 was never synced" {
		t.Errorf("an unsynced node answered %d %v", code, r.Reasons)
	}
	inst = &instance{policy: &Policy{Name: "plain", Filter: func(*Cycle, *NodeInfo) Status { return OK() }}}
	inst.init(sendMsg(t, &abiv1.InitRequest{HostAbiVersion: ABIVersion}))
	code, r = callPoint(t, abiv1.Point_POINT_POD_GROUP_POST_FILTER, req("train"))
	if code != Error || r.Reasons[0] != "the policy does not implement PodGroupPostFilter" {
		t.Errorf("PodGroupPostFilter of a policy without it answered %d %v", code, r.Reasons)
	}
}

// TestPlacementNodesFromParent: PlacementGenerate's placements may hold
// only the views of the parent placement's nodes it was given in that
// call; a resident node outside the parent, a view the policy made itself,
// or an older view of a parent node kept from an earlier call is an error
// naming the placement.
func TestPlacementNodesFromParent(t *testing.T) {
	defer func() { inst = &instance{} }()
	var kept *NodeInfo
	propose := func(parent Placement) *NodeInfo { return parent.Nodes[0] }
	inst = &instance{policy: &Policy{
		Name: "picky",
		PlacementGenerate: func(g *Group, parent Placement) ([]Placement, Status) {
			n := propose(parent)
			if kept == nil {
				kept = parent.Nodes[0]
			}
			return []Placement{{Name: "p", Nodes: []*NodeInfo{n}}}, OK()
		},
	}}
	if code := inst.init(sendMsg(t, &abiv1.InitRequest{HostAbiVersion: ABIVersion})); code != uint32(Success) {
		t.Fatalf("init answered %d", code)
	}
	sync := &abiv1.NodeSync{Upserts: []*abiv1.NodeInfo{
		{Handle: 0, Generation: 1, Node: &abiv1.Node{Name: "a"}},
		{Handle: 1, Generation: 1, Node: &abiv1.Node{Name: "b"}},
	}}
	if code := inst.sync(sendMsg(t, sync)); code != uint32(Success) {
		t.Fatalf("sync answered %d", code)
	}
	pods := []*abiv1.Pod{{Name: "w0", Namespace: "ml", Uid: "u0"}}
	generate := func(handles ...int32) (Code, *abiv1.Result) {
		return callPoint(t, abiv1.Point_POINT_PLACEMENT_GENERATE, &abiv1.PlacementRequest{Pods: pods, Parent: &abiv1.Placement{NodeHandles: handles}})
	}
	if code, r := generate(0); code != Success || len(r.Placements) != 1 || itoas(r.Placements[0].NodeHandles) != "0" {
		t.Fatalf("a parent node: %d %v %v", code, r.Placements, r.Reasons)
	}
	const refused = "placement p holds a node that is not one of the parent placement's"
	for _, tc := range []struct {
		name    string
		propose func(Placement) *NodeInfo
	}{
		{"a resident node outside the parent", func(Placement) *NodeInfo { return inst.nodes[1] }},
		{"a view the policy made", func(Placement) *NodeInfo {
			return NewNodeInfo(&abiv1.NodeInfo{Handle: 0, Node: &abiv1.Node{Name: "a"}})
		}},
	} {
		propose = tc.propose
		if code, r := generate(0); code != Error || len(r.Reasons) != 1 || r.Reasons[0] != refused {
			t.Errorf("%s: %d %v", tc.name, code, r.Reasons)
		}
	}
	// Node a's usage changes: the view kept from the first call is stale.
	usage := &abiv1.NodeSync{Usage: []*abiv1.NodeUsage{{Handle: 0, Generation: 2, Requested: &abiv1.Resources{Pods: 1}, PodCount: 1}}}
	if code := inst.sync(sendMsg(t, usage)); code != uint32(Success) {
		t.Fatalf("usage sync answered %d", code)
	}
	propose = func(Placement) *NodeInfo { return kept }
	if code, r := generate(0, 1); code != Error || len(r.Reasons) != 1 || r.Reasons[0] != refused {
		t.Errorf("an older view of a parent node: %d %v", code, r.Reasons)
	}
	propose = func(parent Placement) *NodeInfo { return parent.Nodes[1] }
	if code, r := generate(0, 1); code != Success || itoas(r.Placements[0].NodeHandles) != "1" {
		t.Errorf("the parent's second node: %d %v %v", code, r.Placements, r.Reasons)
	}
}

// TestPlacementGroupDecodedOnce: the calls of one group cycle share the
// group's views (decoded once); a call with other pods or another group
// sees them, not the last call's; each call gets its own Pods slice, so a
// policy reordering it does not reorder the next call's; a damaged request
// is an error naming its message, and the next whole one is answered.
func TestPlacementGroupDecodedOnce(t *testing.T) {
	var seen []*Group
	policy := &Policy{
		Name: "seen",
		PlacementGenerate: func(g *Group, parent Placement) ([]Placement, Status) {
			seen = append(seen, g)
			return []Placement{{Name: "all", Nodes: parent.Nodes}}, OK()
		},
		PlacementScore: func(g *Group, pa *PlacementAssignment) (int64, Status) {
			seen = append(seen, g)
			slices.Reverse(g.Pods)
			return int64(len(pa.Assignments)), OK()
		},
	}
	inst = &instance{policy: policy}
	defer func() { inst = &instance{} }()
	if code := inst.init(sendMsg(t, &abiv1.InitRequest{HostAbiVersion: ABIVersion})); code != uint32(Success) {
		t.Fatalf("init answered %d", code)
	}
	sync := &abiv1.NodeSync{Upserts: []*abiv1.NodeInfo{{Handle: 0, Generation: 1, Node: &abiv1.Node{Name: "a"}}}}
	if code := inst.sync(sendMsg(t, sync)); code != uint32(Success) {
		t.Fatalf("sync answered %d", code)
	}
	pg := &abiv1.PodGroup{Namespace: "ml", Name: "train", Policy: "gang", MinCount: 2}
	pods := []*abiv1.Pod{{Name: "w0", Uid: "u0"}, {Name: "w1", Uid: "u1"}}
	generate := func(pg *abiv1.PodGroup, pods []*abiv1.Pod) {
		t.Helper()
		if code, r := callPoint(t, abiv1.Point_POINT_PLACEMENT_GENERATE, &abiv1.PlacementRequest{PodGroup: pg, Pods: pods,
			Parent: &abiv1.Placement{NodeHandles: []int32{0}}}); code != Success {
			t.Fatalf("PlacementGenerate answered %d %v", code, r.Reasons)
		}
	}
	score := func(pg *abiv1.PodGroup, pods []*abiv1.Pod, uids ...string) {
		t.Helper()
		m := &abiv1.PlacementScoreRequest{PodGroup: pg, Pods: pods, Placement: &abiv1.Placement{Name: "all", NodeHandles: []int32{0}}}
		for _, uid := range uids {
			m.Assignments = append(m.Assignments, &abiv1.Assignment{PodUid: uid, NodeHandle: 0})
		}
		if code, r := callPoint(t, abiv1.Point_POINT_PLACEMENT_SCORE, m); code != Success || r.PlacementScore != int64(len(uids)) {
			t.Fatalf("PlacementScore answered %d %v, score %d", code, r.Reasons, r.PlacementScore)
		}
	}
	names := func(g *Group) string {
		var out []string
		for _, p := range g.Pods {
			out = append(out, p.Name())
		}
		return g.PodGroup.Key() + ":" + strings.Join(out, ",")
	}

	generate(pg, pods)
	score(pg, pods, "u0", "u1")
	score(pg, pods, "u1", "u0")
	if len(seen) != 3 {
		t.Fatalf("%d calls seen, want 3", len(seen))
	}
	w0 := func(g *Group) *Pod {
		return g.Pods[slices.IndexFunc(g.Pods, func(p *Pod) bool { return p.Name() == "w0" })]
	}
	for i, g := range seen[1:] {
		if g.PodGroup != seen[0].PodGroup || w0(g) != w0(seen[0]) {
			t.Errorf("call %d decoded the group again", i+2)
		}
	}
	// The first PlacementScore reversed its slice; the second got the
	// scheduler's order.
	if got := names(seen[2]); got != "ml/train:w1,w0" { // reversed by the second call itself
		t.Errorf("second score call's group %q, want ml/train:w1,w0 after its own reversal", got)
	}
	if got := names(seen[0]); got != "ml/train:w0,w1" {
		t.Errorf("PlacementGenerate's group %q after the score calls, want ml/train:w0,w1", got)
	}

	// Another member: seen, and its UID assignable.
	more := append(slices.Clone(pods), &abiv1.Pod{Name: "w2", Uid: "u2"})
	score(pg, more, "u2")
	if got := names(seen[3]); got != "ml/train:w2,w1,w0" {
		t.Errorf("group with a third pod seen as %q (reversed by the call), want ml/train:w2,w1,w0", got)
	}
	// Another group with the same pods.
	other := &abiv1.PodGroup{Namespace: "ml", Name: "eval", Policy: "gang", MinCount: 2}
	generate(other, pods)
	if got := names(seen[4]); got != "ml/eval:w0,w1" {
		t.Errorf("other group seen as %q, want ml/eval:w0,w1", got)
	}

	// A request cut short: an error naming the message; the cache does
	// not answer for it, and the next whole request is served.
	req := marshal(t, &abiv1.PlacementScoreRequest{PodGroup: pg, Pods: pods, Placement: &abiv1.Placement{Name: "all", NodeHandles: []int32{0}}})
	copy(inst.buffer(uint32(len(req)-3)), req)
	if code := inst.call(uint32(abiv1.Point_POINT_PLACEMENT_SCORE), uint32(len(req)-3)); code != uint32(Error) ||
		!strings.HasPrefix(inst.result.Reasons[0], "decode PlacementScoreRequest: ") {
		t.Errorf("cut request answered %d %v, want Error naming PlacementScoreRequest", code, inst.result.Reasons)
	}
	score(pg, pods, "u0")
	if got := names(seen[len(seen)-1]); got != "ml/train:w1,w0" {
		t.Errorf("after the cut request the group is %q, want ml/train:w1,w0 (reversed by the call)", got)
	}
}
