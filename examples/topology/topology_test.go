package main

import (
	"fmt"
	"strings"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
	"github.com/wasmsched/wasmsched/guest/guesttest"
)

// gpuNode is a node with 8 GPUs, used GPUs taken, in clique (none: "").
func gpuNode(name, clique string, used int64) *guest.NodeInfo {
	n := guesttest.MakeNode().Name(name).
		Allocatable(map[string]int64{ResourceGPU: 8, "pods": 110}).
		Requested(map[string]int64{ResourceGPU: used})
	if clique != "" {
		n.Label(LabelClique, clique)
	}
	return n.Obj()
}

// gang is n pods of 4 GPUs in gang ml/train of minCount.
func gang(n, minCount int, topology ...string) *guest.Group {
	pg := guesttest.MakePodGroup("ml", "train").Gang(minCount)
	for _, k := range topology {
		pg.Topology(k)
	}
	pods := make([]*guest.Pod, n)
	for i := range pods {
		pods[i] = guesttest.MakePod().Namespace("ml").Name("w" + string(rune('0'+i))).UID("u" + string(rune('0'+i))).
			PodGroup("train").Req(map[string]int64{ResourceGPU: 4}).Obj()
	}
	return guest.NewGroup(pg.Obj(), pods)
}

// cluster: clique a has 4 nodes (room for 8 pods of 4 GPUs), clique b 2
// nodes (4 pods), clique c 2 nodes of which one is half used (3 pods),
// and one node in no clique.
func cluster() guest.Placement {
	return guest.Placement{Nodes: []*guest.NodeInfo{
		gpuNode("a1", "a", 0), gpuNode("a2", "a", 0), gpuNode("a3", "a", 0), gpuNode("a4", "a", 0),
		gpuNode("b1", "b", 0), gpuNode("b2", "b", 0),
		gpuNode("c1", "c", 0), gpuNode("c2", "c", 4),
		gpuNode("x1", "", 0),
	}}
}

func names(pls []guest.Placement) string {
	var out []string
	for _, pl := range pls {
		var ns []string
		for _, n := range pl.Nodes {
			ns = append(ns, n.Name())
		}
		out = append(out, pl.Name+"["+strings.Join(ns, ",")+"]")
	}
	return strings.Join(out, " ")
}

func TestGenerateTightestFirst(t *testing.T) {
	p := guesttest.Load(t, "", DefaultSettings(), New)
	pls, s := p.Generate(gang(3, 3), cluster())
	guesttest.CheckStatus(t, s, guest.OK())
	// b and c hold 3 pods; c (16 GPUs, 12 free) ties b on capacity, by
	// name b first; a holds them too but is the largest.
	want := "nvidia.com/gpu.clique=b[b1,b2] nvidia.com/gpu.clique=c[c1,c2] nvidia.com/gpu.clique=a[a1,a2,a3,a4]"
	if got := names(pls); got != want {
		t.Errorf("placements\n%s\nwant\n%s", got, want)
	}
	// A gang of 4 does not fit c any more (room for 3).
	pls, _ = p.Generate(gang(4, 4), cluster())
	if got, want := names(pls), "nvidia.com/gpu.clique=b[b1,b2] nvidia.com/gpu.clique=a[a1,a2,a3,a4]"; got != want {
		t.Errorf("gang of 4: %s, want %s", got, want)
	}
	// minCount below the pods: the domain must hold minCount.
	pls, _ = p.Generate(gang(6, 3), cluster())
	if got := len(pls); got != 3 {
		t.Errorf("gang of 6 with minCount 3: %d placements, want 3", got)
	}
}

// At most maxPlacements domains are proposed, the tightest: the scheduler
// tries the whole group on each, and WasmPolicy refuses more than 256.
func TestGenerateBounded(t *testing.T) {
	var nodes []*guest.NodeInfo
	for i := range 300 {
		clique := fmt.Sprintf("c%03d", i)
		nodes = append(nodes, gpuNode(clique+"-1", clique, 0))
		if i%2 == 1 { // odd cliques have two nodes: larger
			nodes = append(nodes, gpuNode(clique+"-2", clique, 0))
		}
	}
	p := guesttest.Load(t, "", DefaultSettings(), New)
	pls, s := p.Generate(gang(2, 2), guest.Placement{Nodes: nodes})
	guesttest.CheckStatus(t, s, guest.OK())
	if len(pls) != 32 || pls[0].Name != LabelClique+"=c000" || pls[31].Name != LabelClique+"=c062" {
		t.Fatalf("%d placements from %s to %s, want the 32 smallest cliques c000 to c062", len(pls), pls[0].Name, pls[len(pls)-1].Name)
	}
	p = guesttest.Load(t, `{"maxPlacements": 256}`, DefaultSettings(), New)
	if pls, _ = p.Generate(gang(2, 2), guest.Placement{Nodes: nodes}); len(pls) != 256 || pls[150].Name != LabelClique+"=c001" {
		t.Fatalf("maxPlacements 256: %d placements, the 151st %s; want 256, the single-node cliques first", len(pls), pls[150].Name)
	}
}

func TestGenerateNoDomainFits(t *testing.T) {
	p := guesttest.Load(t, "", DefaultSettings(), New)
	pls, s := p.Generate(gang(9, 9), cluster())
	if len(pls) != 0 {
		t.Errorf("placements %s for a gang no domain holds", names(pls))
	}
	guesttest.CheckStatus(t, s, guest.Reject("topology: gang ml/train needs 9 pods × 4 nvidia.com/gpu within one nvidia.com/gpu.clique domain; the largest, a, has room for 8 (3 domains)"))

	// With allowSplit: the fewest domains that hold it, largest first.
	p = guesttest.Load(t, `{"allowSplit": true}`, DefaultSettings(), New)
	pls, s = p.Generate(gang(9, 9), cluster())
	guesttest.CheckStatus(t, s, guest.OK())
	if got, want := names(pls), "nvidia.com/gpu.clique in a,b[a1,a2,a3,a4,b1,b2]"; got != want {
		t.Errorf("split: %s, want %s", got, want)
	}
	// More than the whole cluster: rejected even with allowSplit.
	_, s = p.Generate(gang(16, 16), cluster())
	if s.Code != guest.Unschedulable {
		t.Errorf("gang of 16 with allowSplit: %v, want Unschedulable", s)
	}
}

func TestGenerateKeys(t *testing.T) {
	parent := guest.Placement{Nodes: []*guest.NodeInfo{
		guesttest.MakeNode().Name("r1").Label("example.com/rack", "r1").Allocatable(map[string]int64{ResourceGPU: 8}).Obj(),
		guesttest.MakeNode().Name("r2").Label("example.com/rack", "r2").Allocatable(map[string]int64{ResourceGPU: 8}).Obj(),
	}}
	// The settings' key.
	p := guesttest.Load(t, `{"topologyKey": "example.com/rack"}`, DefaultSettings(), New)
	pls, s := p.Generate(gang(2, 2), parent)
	guesttest.CheckStatus(t, s, guest.OK())
	if got, want := names(pls), "example.com/rack=r1[r1] example.com/rack=r2[r2]"; got != want {
		t.Errorf("rack key: %s, want %s", got, want)
	}
	// The PodGroup's own topology constraint wins over the settings.
	p = guesttest.Load(t, "", DefaultSettings(), New)
	pls, _ = p.Generate(gang(2, 2, "example.com/rack"), parent)
	if len(pls) != 2 {
		t.Errorf("group's key: %s", names(pls))
	}
	// No node has the key: unresolvable, saying so.
	_, s = p.Generate(gang(2, 2), parent)
	guesttest.CheckStatus(t, s, guest.RejectUnresolvable("topology: no node of 2 has the label nvidia.com/gpu.clique"))
}

func TestSettingsRefused(t *testing.T) {
	for raw, want := range map[string]string{
		`{"topologyKey": ""}`:    `settings: "topologyKey" must name a node label`,
		`{"resource": ""}`:       `settings: "resource" must name a resource`,
		`{"split": true}`:        `settings: json: unknown field "split"`,
		`{"maxPlacements": 0}`:   `settings: "maxPlacements" is 0; want 1 to 256`,
		`{"maxPlacements": 257}`: `settings: "maxPlacements" is 257; want 1 to 256`,
	} {
		if _, err := guest.Load([]byte(raw), DefaultSettings(), New); err == nil || err.Error() != want {
			t.Errorf("settings %s: %v, want %q", raw, err, want)
		}
	}
}

func TestScoreAndNormalize(t *testing.T) {
	p := guesttest.Load(t, "", DefaultSettings(), New)
	g := gang(2, 2)
	all := cluster().Nodes
	small := &guest.PlacementAssignment{Placement: guest.Placement{Name: "b", Nodes: all[4:6]}}
	large := &guest.PlacementAssignment{Placement: guest.Placement{Name: "a", Nodes: all[0:4]}}
	split := &guest.PlacementAssignment{Placement: guest.Placement{Name: "a,b", Nodes: all[0:6]}}
	var scores []guest.PlacementScore
	for _, pl := range []*guest.PlacementAssignment{small, large, split} {
		v, s := p.Score(g, pl)
		guesttest.CheckStatus(t, s, guest.OK())
		scores = append(scores, guest.PlacementScore{Placement: pl.Placement.Name, Score: v})
	}
	if !(scores[0].Score > scores[1].Score && scores[1].Score > scores[2].Score) {
		t.Errorf("raw scores %v: want the smallest domain first, a split last", scores)
	}
	guesttest.CheckStatus(t, p.Normalize(g, scores), guest.OK())
	if scores[0].Score != 100 || scores[2].Score != 0 || scores[1].Score <= 0 || scores[1].Score >= 100 {
		t.Errorf("normalised %v", scores)
	}
}

// A gang with members already running stays in their domain, even when a
// tighter one would hold it.
func TestGenerateJoinsRunningMembers(t *testing.T) {
	p := guesttest.Load(t, "", DefaultSettings(), New)
	pg := guesttest.MakePodGroup("ml", "train").Gang(4).MemberNodes("a3", "a4").Obj()
	g := guest.NewGroup(pg, gang(2, 4).Pods)
	pls, s := p.Generate(g, cluster())
	guesttest.CheckStatus(t, s, guest.OK())
	if got, want := names(pls), "nvidia.com/gpu.clique=a[a1,a2,a3,a4]"; got != want {
		t.Errorf("placements %s, want %s", got, want)
	}
}

// Explain names the domains that had room when members were turned away
// there, and adds nothing when Generate already said why or no domain had
// room.
func TestExplain(t *testing.T) {
	p, _ := New(DefaultSettings())
	nodes := cluster().Nodes
	noms, s := p.Explain(gang(4, 4), guesttest.Failure(nodes))
	want := guest.Reject("topology: gang ml/train fit in none of the 2 nvidia.com/gpu.clique domains with room for 4 pods × 4 nvidia.com/gpu (a, b): members were turned away on their nodes")
	if len(noms) != 0 || !guesttest.CheckStatus(t, s, want) {
		t.Errorf("nominations %v", noms)
	}
	_, s = p.Explain(gang(4, 4), guesttest.Failure(nodes, "topology: no room"))
	guesttest.CheckStatus(t, s, guest.Status{Code: guest.Unschedulable})
	_, s = p.Explain(gang(9, 9), guesttest.Failure(nodes))
	guesttest.CheckStatus(t, s, guest.Status{Code: guest.Unschedulable})
	_, s = p.Explain(gang(0, 4), guesttest.Failure(nodes))
	guesttest.CheckStatus(t, s, guest.Status{Code: guest.Unschedulable})
	// Only the domains Generate proposed were tried; the others are counted.
	bounded := DefaultSettings()
	bounded.MaxPlacements = 1
	p, _ = New(bounded)
	_, s = p.Explain(gang(4, 4), guesttest.Failure(nodes))
	guesttest.CheckStatus(t, s, guest.Reject("topology: gang ml/train fit in none of the 1 nvidia.com/gpu.clique domains with room for 4 pods × 4 nvidia.com/gpu (b): members were turned away on their nodes; 1 more with room not tried (maxPlacements 1)"))
}

// Generate keeps its grouping of the nodes into domains while the parent's
// nodes keep their cliques and GPUs, and counts the room in each call: a
// pod bound in a domain is seen in the next call, a node updated with its
// clique and GPUs unchanged keeps the grouping, a node given more GPUs or
// relabelled into another domain regroups them.
func TestGenerateKeepsDomains(t *testing.T) {
	node := func(name, clique string, gpus int64) *abiv1.Node {
		return &abiv1.Node{Name: name, Labels: []*abiv1.KeyValue{{Key: LabelClique, Value: clique}},
			Allocatable: &abiv1.Resources{Pods: 110, Scalars: []*abiv1.Scalar{{Name: ResourceGPU, Value: gpus}}}}
	}
	// view is a node with used GPUs taken: views of one node object with
	// different usage, as the SDK makes them from usage updates.
	view := func(n *abiv1.Node, used int64) *guest.NodeInfo {
		return guest.NewNodeInfo(&abiv1.NodeInfo{Node: n, Requested: &abiv1.Resources{Scalars: []*abiv1.Scalar{{Name: ResourceGPU, Value: used}}}})
	}
	a1, a2, b1 := node("a1", "a", 8), node("a2", "a", 8), node("b1", "b", 8)
	p := guesttest.Load(t, "", DefaultSettings(), New)
	generate := func(want string, nodes ...*guest.NodeInfo) {
		t.Helper()
		pls, s := p.Generate(gang(2, 2), guest.Placement{Nodes: nodes})
		guesttest.CheckStatus(t, s, guest.OK())
		if got := names(pls); got != want {
			t.Errorf("placements %s, want %s", got, want)
		}
	}
	generate("nvidia.com/gpu.clique=b[b1] nvidia.com/gpu.clique=a[a1,a2]", view(a1, 0), view(a2, 0), view(b1, 0))
	kept := p.last
	// b1's GPUs taken: b has no room left, a does.
	generate("nvidia.com/gpu.clique=a[a1,a2]", view(a1, 0), view(a2, 4), view(b1, 8))
	// b1 updated (its status, say), in the same clique with the same GPUs.
	b1 = node("b1", "b", 8)
	generate("nvidia.com/gpu.clique=a[a1,a2]", view(a1, 0), view(a2, 4), view(b1, 8))
	if p.last != kept {
		t.Error("the grouping was made again for nodes with the same cliques and GPUs")
	}
	// b1 with 16 GPUs: b ties a on capacity, a first by name.
	b1 = node("b1", "b", 16)
	generate("nvidia.com/gpu.clique=a[a1,a2] nvidia.com/gpu.clique=b[b1]", view(a1, 0), view(a2, 4), view(b1, 0))
	if p.last == kept {
		t.Error("the grouping was kept for a node with more GPUs")
	}
	// b1 moved into clique a: one domain of three nodes.
	b1 = node("b1", "a", 8)
	generate("nvidia.com/gpu.clique=a[a1,a2,b1]", view(a1, 0), view(a2, 4), view(b1, 8))
	// Another parent (fewer nodes): grouped anew.
	generate("nvidia.com/gpu.clique=a[a1,b1]", view(a1, 0), view(b1, 0))
}
