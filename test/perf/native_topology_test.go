//go:build !k8s1.35 && !k8s1.36

package perf

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/host/convert"
	"github.com/wasmsched/wasmsched/host/policy"
	"github.com/wasmsched/wasmsched/internal/hosttest"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// TestNativeTopologyTwin checks that TopologyNative proposes the placements
// (names and nodes, in order), rejects with the reasons and codes, and
// scores and normalises as the topology example built as wasm does, through
// the host, for gangs that fit one domain, several, none, whose members
// already run, with and without allowSplit and a PodGroup's own topology
// key. The Gang workload compares the two only while this passes.
func TestNativeTopologyTwin(t *testing.T) {
	ctx := context.Background()
	wasm := testwasm.Bytes(t, "examples/topology")
	node := func(name, clique, rack string, gpus int, pods ...*v1.Pod) fwk.NodeInfo {
		n := st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{resourceGPU: fmt.Sprint(gpus), v1.ResourcePods: "110"})
		if clique != "" {
			n = n.Label(gangClique, clique)
		}
		if rack != "" {
			n = n.Label("example.com/rack", rack)
		}
		return hosttest.NodeInfo(n.Obj(), pods...)
	}
	pod := func(name string, gpus int) *v1.Pod {
		return st.MakePod().Namespace("ml").Name(name).UID("uid-" + name).Res(map[v1.ResourceName]string{resourceGPU: fmt.Sprint(gpus)}).Obj()
	}
	busy := pod("busy", 4)
	busy.Spec.NodeName = "c2"
	parent := []fwk.NodeInfo{
		node("a1", "a", "r1", 8), node("a2", "a", "r1", 8), node("a3", "a", "r2", 8),
		node("b1", "b", "r2", 8), node("b2", "b", "r2", 8),
		node("c1", "c", "r3", 8), node("c2", "c", "r3", 8, busy),
		node("d1", "d", "r3", 16),
		node("x1", "", "", 8),
	}
	type gang struct {
		name     string
		settings string
		pods     int
		gpus     int
		minCount int32
		key      string   // the PodGroup's topology constraint
		members  []string // nodes the members run on
		parent   []fwk.NodeInfo
	}
	gangs := []gang{
		{name: "three of four GPUs", pods: 3, gpus: 4, minCount: 3},
		{name: "minCount below the pods", pods: 5, gpus: 4, minCount: 2},
		{name: "fits no domain", pods: 7, gpus: 4, minCount: 7},
		{name: "split allowed", settings: `{"allowSplit": true}`, pods: 7, gpus: 4, minCount: 7},
		{name: "rack key from the PodGroup", pods: 4, gpus: 8, minCount: 4, key: "example.com/rack"},
		{name: "members running", pods: 2, gpus: 4, minCount: 3, members: []string{"c2"}},
		{name: "no labelled node", pods: 2, gpus: 1, minCount: 2, parent: parent[len(parent)-1:]},
		{name: "key from settings", settings: `{"topologyKey": "example.com/rack"}`, pods: 2, gpus: 8, minCount: 2},
		{name: "bounded proposals", settings: `{"maxPlacements": 2}`, pods: 2, gpus: 4, minCount: 2},
	}
	for _, g := range gangs {
		t.Run(g.name, func(t *testing.T) {
			pg := &schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train"}}
			pg.Spec.SchedulingPolicy.Gang = &schedv1beta1.GangSchedulingPolicy{MinCount: g.minCount}
			if g.key != "" {
				pg.Spec.SchedulingConstraints = &schedv1beta1.PodGroupSchedulingConstraints{Topology: []schedv1beta1.TopologyConstraint{{Key: g.key}}}
			}
			var pods []*v1.Pod
			for i := range g.pods {
				pods = append(pods, pod(fmt.Sprintf("w%d", i), g.gpus))
			}
			nodes := parent
			if g.parent != nil {
				nodes = g.parent
			}

			p := hosttest.Policy(t, "topology", wasm, g.settings)
			msg := convert.PodGroup(pg)
			msg.MemberNodes = g.members
			wg := &policy.Group{PodGroup: msg, Pods: pods}
			wpls, ws, err := p.GeneratePlacements(ctx, wg, policy.Placement{Nodes: nodes})
			if err != nil {
				t.Fatal(err)
			}

			nat, err := newTopologyNative([]byte(g.settings))
			if err != nil {
				t.Fatal(err)
			}
			nat.memberNodes = func(string, string) []string { return g.members }
			info := &framework.PodGroupInfo{Namespace: "ml", Name: "train", UnscheduledPods: pods, PodGroup: pg}
			res, ns := nat.GeneratePlacements(ctx, nil, info, &fwk.Placement{Nodes: nodes})

			var reasons []string
			if ns != nil {
				reasons = ns.Reasons()
			}
			if want, got := policy.CodeName(ws.Code), ns.Code().String(); want != got || !slices.Equal(ws.Reasons, reasons) {
				t.Fatalf("native %s %q, wasm %s %q", got, reasons, want, ws.Reasons)
			}
			if !ns.IsSuccess() {
				if len(ws.Reasons) == 0 {
					t.Fatal("a rejection without a reason")
				}
				return
			}
			var want, got []string
			for _, pl := range wpls {
				want = append(want, placementString(pl.Name, pl.Nodes))
			}
			for _, pl := range res.Placements {
				got = append(got, placementString(pl.Name, pl.Nodes))
			}
			if !slices.Equal(got, want) || len(got) == 0 {
				t.Fatalf("placements\nnative %v\nwasm   %v", got, want)
			}

			var wscores []policy.PlacementScore
			var nscores []fwk.PlacementScore
			for i, pl := range wpls {
				var as []policy.Assignment
				for j, pd := range pods[:min(len(pods), len(pl.Nodes))] {
					as = append(as, policy.Assignment{PodUID: string(pd.UID), Node: pl.Nodes[j]})
				}
				v, s, err := p.ScorePlacement(ctx, wg, pl, as)
				if err != nil || !s.IsSuccess() {
					t.Fatalf("wasm score %s: %v %v", pl.Name, s, err)
				}
				nv, nst := nat.ScorePlacement(ctx, nil, info, &fwk.PodGroupAssignments{Placement: res.Placements[i]})
				if !nst.IsSuccess() || nv != v {
					t.Errorf("placement %s: native score %d %v, wasm %d", pl.Name, nv, nst, v)
				}
				wscores = append(wscores, policy.PlacementScore{Name: pl.Name, Score: v})
				nscores = append(nscores, fwk.PlacementScore{Placement: res.Placements[i], Score: nv})
			}
			if s, err := p.NormalizePlacementScores(ctx, wg, wscores); err != nil || !s.IsSuccess() {
				t.Fatalf("wasm normalize: %v %v", s, err)
			}
			if s := nat.NormalizePlacementScore(ctx, nil, info, nscores); !s.IsSuccess() {
				t.Fatalf("native normalize: %v", s)
			}
			for i := range wscores {
				if wscores[i].Score != nscores[i].Score {
					t.Errorf("placement %s: native normalised %d, wasm %d", wscores[i].Name, nscores[i].Score, wscores[i].Score)
				}
			}
		})
	}
}

func placementString(name string, nodes []fwk.NodeInfo) string {
	var ns []string
	for _, n := range nodes {
		ns = append(ns, n.Node().Name)
	}
	return name + "[" + strings.Join(ns, ",") + "]"
}
