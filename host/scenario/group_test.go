package scenario

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/host/eval"
)

const groupYAML = `apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: g, namespace: default}
spec:
  schedulingPolicy: {gang: {minCount: 2}}
  schedulingConstraints: {topology: [{key: rack}]}
`

// A pod-group scenario reads its PodGroup and members; a bad one is refused
// naming the field.
func TestReadGroupScenario(t *testing.T) {
	files := map[string]string{"nodes.yaml": nodesYAML, "pod.yaml": podYAML, "group.yaml": groupYAML}
	const head = "policies: [{module: p.wasm}]\nscenarios:\n"
	files["a.yaml"] = head + "- name: s\n  podGroup: group.yaml\n  members: [{metadata: {name: m0}}, {metadata: {name: m1}}]\n  nodes: nodes.yaml\n" +
		"  expect: {placement: {selected: rack=r1, assignments: {m0: n1}}}"
	dir := write(t, files)
	f, err := ReadFile(filepath.Join(dir, "a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Scenarios[0]
	g := s.Group
	if g == nil || g.PodGroup.GetName() != "g" || g.PodGroup.GetMinCount() != 2 || g.PodGroup.GetTopologyKeys()[0] != "rack" ||
		len(g.Members) != 2 || g.Members[1].UID == "" || len(g.Nodes) != 2 {
		t.Fatalf("group %+v", g)
	}
	pe := s.Expect.Placement
	if pe == nil || *pe.Selected != "rack=r1" || pe.Assignments["m0"] != "n1" {
		t.Errorf("placement expectation %+v", pe)
	}
	got := CheckGroup(s.Expect, &eval.GroupReport{Selected: "rack=r2", Assignments: map[string]string{"m0": "n2"}})
	if len(got) != 2 || got[0].Field != "expect.placement.selected" || got[1].Field != "expect.placement.assignments.m0" {
		t.Errorf("mismatches %+v", got)
	}
	exp := Expect{Placement: &PlacementExpect{Nominated: map[string]string{"m0": "n1", "m1": ""}}}
	got = CheckGroup(exp, &eval.GroupReport{PostFilter: &eval.GroupPostFilter{Code: "Success", Nominated: map[string]string{"m0": "n2", "m1": "n1"}}})
	if len(got) != 2 || got[0].Field != "expect.placement.nominated.m0" || got[0].Want != "n1" || got[0].Got != "n2" || got[1].Field != "expect.placement.nominated.m1" || got[1].Want != "none" {
		t.Errorf("nomination mismatches %+v", got)
	}

	for _, tc := range []struct{ file, want string }{
		{head + "- {name: s, pod: pod.yaml, podGroup: group.yaml, members: pod.yaml, nodes: nodes.yaml, expect: {}}",
			`scenario "s": pod: a scenario places a pod or a pod group (podGroup and members), not both`},
		{head + "- {name: s, podGroup: group.yaml, nodes: nodes.yaml, expect: {}}",
			`scenario "s": members: missing: the group's pods, files or inline Pods`},
		{head + "- {name: s, podGroup: {apiVersion: scheduling.k8s.io/v1beta1, metadata: {name: g}, spec: {schedulingPolicy: {gang: {minCount: 0}}}}, members: pod.yaml, nodes: nodes.yaml, expect: {}}",
			`scenario "s": podGroup: PodGroup g: spec.schedulingPolicy.gang.minCount must be a positive integer`},
		{head + "- {name: s, podGroup: group.yaml, members: pod.yaml, nodes: nodes.yaml, expect: {placement: {}}}",
			`scenario "s": expect.placement: states nothing: give selected, assignments, a reason or nominated`},
	} {
		files["b.yaml"] = tc.file
		dir := write(t, files)
		path := filepath.Join(dir, "b.yaml")
		_, err := ReadFile(path)
		if err == nil || !strings.Contains(err.Error(), path+": "+tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}
