//go:build !wasip1

package main

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	hostpolicy "github.com/wasmsched/wasmsched/host/policy"
	"github.com/wasmsched/wasmsched/internal/hosttest"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func TestMain(m *testing.M) { testwasm.Main(m) }

// Every test runs against the module built by each toolchain (Go and
// TinyGo), which must agree (testwasm.Agree).
const pkg = "examples/topology"

var ctx = context.Background()

// hostNode is a node of 8 GPUs in clique (none: "") with pods on it.
func hostNode(name, clique string, pods ...*v1.Pod) fwk.NodeInfo {
	n := st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{ResourceGPU: "8", v1.ResourcePods: "110"})
	if clique != "" {
		n = n.Label(LabelClique, clique)
	}
	return hosttest.NodeInfo(n.Obj(), pods...)
}

func member(name string) *v1.Pod {
	return st.MakePod().Namespace("ml").Name(name).UID("uid-" + name).
		Res(map[v1.ResourceName]string{ResourceGPU: "4"}).Obj()
}

func group(n int) *hostpolicy.Group {
	g := &hostpolicy.Group{PodGroup: &abiv1.PodGroup{Namespace: "ml", Name: "train", Policy: "gang", MinCount: int32(n), Pending: int32(n)}}
	for i := range n {
		g.Pods = append(g.Pods, member("w"+string(rune('0'+i))))
	}
	return g
}

type outcome struct {
	Placements []string
	Status     hostpolicy.Status
	Scores     []hostpolicy.PlacementScore
}

func nodeNames(pl hostpolicy.Placement) string {
	var out []string
	for _, n := range pl.Nodes {
		out = append(out, n.Node().Name)
	}
	return pl.Name + "[" + strings.Join(out, ",") + "]"
}

// TestPlacementCalls: through the host, the module proposes the domains
// that hold the gang, tightest first, by the nodes the host gave it; it
// scores and normalises them; and a gang no domain holds gets the reason.
func TestPlacementCalls(t *testing.T) {
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) outcome {
		p := hosttest.Policy(t, Name, wasm, "")
		if !p.Info().GetWantsPodGroups() {
			t.Error("the module does not declare wants_pod_groups")
		}
		busy := member("busy")
		busy.Spec.NodeName = "c2"
		parent := hostpolicy.Placement{Nodes: []fwk.NodeInfo{
			hostNode("a1", "a"), hostNode("a2", "a"), hostNode("a3", "a"),
			hostNode("b1", "b"), hostNode("b2", "b"),
			hostNode("c1", "c"), hostNode("c2", "c", busy),
			hostNode("x1", ""),
		}}
		var out outcome
		pls, s, err := p.GeneratePlacements(ctx, group(3), parent)
		if err != nil || !s.IsSuccess() {
			t.Fatalf("GeneratePlacements: %v %v", s, err)
		}
		for _, pl := range pls {
			out.Placements = append(out.Placements, nodeNames(pl))
		}
		want := "nvidia.com/gpu.clique=b[b1,b2] nvidia.com/gpu.clique=c[c1,c2] nvidia.com/gpu.clique=a[a1,a2,a3]"
		if got := strings.Join(out.Placements, " "); got != want {
			t.Errorf("placements\n%s\nwant\n%s", got, want)
		}
		g := group(3)
		for _, pl := range pls {
			as := []hostpolicy.Assignment{{PodUID: "uid-w0", Node: pl.Nodes[0]}, {PodUID: "uid-w1", Node: pl.Nodes[0]}, {PodUID: "uid-w2", Node: pl.Nodes[1]}}
			v, s, err := p.ScorePlacement(ctx, g, pl, as)
			if err != nil || !s.IsSuccess() {
				t.Fatalf("ScorePlacement %s: %v %v", pl.Name, s, err)
			}
			out.Scores = append(out.Scores, hostpolicy.PlacementScore{Name: pl.Name, Score: v})
		}
		if s, err := p.NormalizePlacementScores(ctx, g, out.Scores); err != nil || !s.IsSuccess() {
			t.Fatalf("NormalizePlacementScores: %v %v", s, err)
		}
		if out.Scores[0].Score != 100 || out.Scores[2].Score != 0 {
			t.Errorf("normalised scores %v: want b 100, a 0", out.Scores)
		}

		// Seven pods of 4 GPUs: a has room for 6, the largest.
		pls, out.Status, err = p.GeneratePlacements(ctx, group(7), parent)
		if err != nil || len(pls) != 0 {
			t.Fatalf("gang of 7: %d placements, %v", len(pls), err)
		}
		wantReason := "topology: gang ml/train needs 7 pods × 4 nvidia.com/gpu within one nvidia.com/gpu.clique domain; the largest, a, has room for 6 (3 domains)"
		if out.Status.Code != abiv1.Code_CODE_UNSCHEDULABLE || len(out.Status.Reasons) != 1 || out.Status.Reasons[0] != wantReason {
			t.Errorf("gang of 7: %v, want Unschedulable %q", out.Status, wantReason)
		}
		return out
	})
}
