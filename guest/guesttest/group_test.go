package guesttest

import (
	"testing"

	"github.com/wasmsched/wasmsched/guest"
)

// A policy's PodGroupPostFilter is tested natively with Failure and
// Nominated.
func TestGroupFailure(t *testing.T) {
	nodes := []*guest.NodeInfo{MakeNode().Name("a").Obj(), MakeNode().Name("b").Obj()}
	pods := []*guest.Pod{MakePod().Name("w0").PodGroup("train").Obj(), MakePod().Name("w1").PodGroup("train").Obj()}
	g := guest.NewGroup(MakePodGroup("ml", "train").Gang(2).Obj(), pods)
	f := Failure(nodes, "no rack holds 2 pods")
	if len(f.Nodes) != 2 || f.Rejection[0] != "no rack holds 2 pods" {
		t.Fatalf("failure %+v", f)
	}
	post := func(g *guest.Group, f *guest.GroupFailure) ([]guest.Nomination, guest.Status) {
		return []guest.Nomination{{Pod: g.Pods[1], Node: f.Nodes[1].Name()}}, guest.OK()
	}
	noms, s := post(g, f)
	if got := Nominated(noms); !s.IsSuccess() || len(got) != 1 || got["w1"] != "b" {
		t.Errorf("nominated %v %v", got, s)
	}
}
