package policy

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func namedNode(name string) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	return ni
}

// placementsOf accepts placements made of the parent's handles and refuses,
// naming the fault, every malformed answer of a PlacementGenerate.
func TestPlacementsOf(t *testing.T) {
	byHandle := map[int32]fwk.NodeInfo{3: namedNode("n3"), 5: namedNode("n5")}
	got, err := placementsOf([]*abiv1.Placement{{Name: "p", NodeHandles: []int32{5, 3}}, {Name: "q", NodeHandles: []int32{3}}}, byHandle)
	if err != nil || len(got) != 2 || got[0].Name != "p" || got[0].Nodes[0].Node().Name != "n5" || got[1].Nodes[0].Node().Name != "n3" {
		t.Fatalf("placementsOf: %v %v", got, err)
	}
	many := make([]*abiv1.Placement, MaxPlacements+1)
	for i := range many {
		many[i] = &abiv1.Placement{Name: strings.Repeat("x", i+1)}
	}
	for _, c := range []struct {
		pls  []*abiv1.Placement
		want string
	}{
		{[]*abiv1.Placement{{Name: "p", NodeHandles: []int32{4}}}, `placement "p" names node handle 4, which is not a node of the parent placement`},
		{[]*abiv1.Placement{{Name: "p", NodeHandles: []int32{3, 5, 3}}}, `placement "p" names node n3 twice`},
		{[]*abiv1.Placement{{Name: "p"}, {Name: "p"}}, `placement "p" is proposed twice`},
		{[]*abiv1.Placement{{NodeHandles: []int32{3}}}, `placement 0 has no name`},
		{many, `it proposed 257 placements, more than the bound of 256`},
	} {
		if _, err := placementsOf(c.pls, byHandle); err == nil || err.Error() != c.want {
			t.Errorf("placementsOf: %v, want %q", err, c.want)
		}
	}
}

// The PodGroup goes only to policies that want it, appended to the cycle's
// request; the group cycle goes to every policy.
func TestRequestForGroups(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w0", Namespace: "ml", UID: "u0"}}
	c := NewCycle(pod, nil)
	c.Group = &abiv1.PodGroup{Namespace: "ml", Name: "train", Policy: "gang", MinCount: 2}
	c.GroupCycle = &abiv1.GroupCycle{Placement: "rack=a"}
	for _, wants := range []bool{false, true} {
		p := &Policy{info: &abiv1.PolicyInfo{WantsPodGroups: wants}}
		var req abiv1.CycleRequest
		if err := req.UnmarshalVT(c.requestFor(p)); err != nil {
			t.Fatal(err)
		}
		if req.GetPod().GetName() != "w0" || req.GetGroupCycle().GetPlacement() != "rack=a" {
			t.Errorf("wants %v: request %v lacks the pod or the group cycle", wants, &req)
		}
		if got := req.GetPodGroup().GetName() == "train"; got != wants {
			t.Errorf("wants_pod_groups %v: PodGroup sent %v", wants, got)
		}
	}
}

// A guest that traps, answers Error or breaks the rules in PlacementGenerate
// gives an error naming the fault; the instance that trapped is replaced.
func TestGeneratePlacementsFaults(t *testing.T) {
	testwasm.SkipUnderRace(t)
	wasm := testwasm.Bytes(t, "test/guests/groupprobe")
	parent := Placement{Nodes: []fwk.NodeInfo{namedNode("n1"), namedNode("n2")}}
	g := &Group{PodGroup: &abiv1.PodGroup{Namespace: "ml", Name: "train", Policy: "gang", MinCount: 2}}
	for _, c := range []struct{ mode, want string }{
		{"panic", "placement_generate: wasm error: unreachable: panic: groupprobe: panic in PlacementGenerate"},
		{"duplicate", `placement "twice" names node n1 twice`},
		{"many", "it proposed 300 placements, more than the bound of 256"},
	} {
		p, err := Load(context.Background(), Options{Name: "groupprobe", Wasm: wasm, Settings: []byte(`{"generate": "` + c.mode + `"}`), MaxInstances: 1, Engine: engine.Config{CallTimeout: testCallTimeout}})
		if err != nil {
			t.Fatal(err)
		}
		if !p.Implements(abiv1.Point_POINT_PLACEMENT_GENERATE) {
			t.Fatalf("%s: the probe does not export PlacementGenerate", c.mode)
		}
		pls, _, err := p.GeneratePlacements(context.Background(), g, parent)
		if err == nil || !strings.Contains(err.Error(), c.want) || pls != nil {
			t.Errorf("%s: %v placements, error %v; want one containing %q", c.mode, pls, err, c.want)
		}
		var ce *engine.CallError
		if wantKind := map[bool]engine.Kind{true: engine.KindTrap, false: engine.KindInvalid}[c.mode == "panic"]; !errors.As(err, &ce) || ce.Kind != wantKind {
			t.Errorf("%s: error %v is not a call error of kind %s", c.mode, err, wantKind)
		}
		// The next call works on a fresh instance (a trap discards one).
		if _, _, err := p.GeneratePlacements(context.Background(), g, parent); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s, again: %v", c.mode, err)
		}
		p.Close(context.Background())
	}
	p, err := Load(context.Background(), Options{Name: "groupprobe", Wasm: wasm, Settings: []byte(`{"generate": "error"}`), MaxInstances: 1, Engine: engine.Config{CallTimeout: testCallTimeout}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	_, s, err := p.GeneratePlacements(context.Background(), g, parent)
	if err != nil || s.Code != abiv1.Code_CODE_ERROR || s.Reasons[0] != "groupprobe: error in PlacementGenerate" {
		t.Errorf("error mode: %v %v", s, err)
	}
}

// nominationsOf accepts nominations of the cycle's members to the call's
// nodes and refuses, naming the fault, every other.
func TestNominationsOf(t *testing.T) {
	pods := []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "w0", Namespace: "ml", UID: "u0"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: "ml", UID: "u1"}},
	}
	nodes := []fwk.NodeInfo{namedNode("a"), namedNode("b")}
	got, err := nominationsOf([]*abiv1.Nomination{{PodUid: "u1", NodeName: "b"}, {PodUid: "u0", NodeName: "a"}}, pods, nodes)
	if err != nil || len(got) != 2 || got[0].Pod != pods[1] || got[0].Node != "b" || got[1].Pod != pods[0] {
		t.Fatalf("nominationsOf: %v %v", got, err)
	}
	for _, c := range []struct {
		ns   []*abiv1.Nomination
		want string
	}{
		{[]*abiv1.Nomination{{PodUid: "x", NodeName: "a"}}, `it nominated pod "x", which is not a member the cycle tried`},
		{[]*abiv1.Nomination{{PodUid: "u0", NodeName: "a"}, {PodUid: "u0", NodeName: "b"}}, `it nominated pod ml/w0 twice`},
		{[]*abiv1.Nomination{{PodUid: "u1", NodeName: "z"}}, `it nominated pod ml/w1 to node "z", which is not a node of the scheduler's snapshot`},
	} {
		if _, err := nominationsOf(c.ns, pods, nodes); err == nil || err.Error() != c.want {
			t.Errorf("nominationsOf: %v, want %q", err, c.want)
		}
	}
}
