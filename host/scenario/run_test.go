package scenario

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func TestMain(m *testing.M) { testwasm.Main(m) }

// run reads a scenario file written into a new directory beside the
// nodepin testdata, with MODULE and PROBE replaced by built modules, and
// runs each scenario.
func run(t *testing.T, runner *Runner, file string) []*Result {
	t.Helper()
	root := testwasm.Root(t)
	file = strings.NewReplacer(
		"MODULE", testwasm.Path(t, "examples/nodepin"),
		"PROBE", testwasm.Path(t, "test/guests/probe"),
		"TESTDATA", filepath.Join(root, "examples", "nodepin", "testdata"),
	).Replace(file)
	dir := write(t, map[string]string{"s.yaml": file})
	f, err := ReadFile(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*Result
	for _, s := range f.Scenarios {
		out = append(out, runner.Run(context.Background(), s))
	}
	return out
}

// A scenario that holds passes; one that does not fails with the
// differences, each naming its field.
func TestRunNodepin(t *testing.T) {
	res := run(t, &Runner{}, `
policies:
- {module: MODULE, name: nodepin, settingsFile: TESTDATA/settings.json}
scenarios:
- name: holds
  pod: TESTDATA/pod.yaml
  nodes: TESTDATA/nodes.yaml
  expect:
    nodes:
      k8s-node1: {code: UnschedulableAndUnresolvable, reason: "not one of the allowed nodes [k8s-node2, k8s-node3]"}
      k8s-node2: {code: Success, score: 0}
      k8s-node3: Success
    order: [k8s-node2, k8s-node3]
    selected: k8s-node2
    permit: {code: Success}
    error: ""
    failure: ""
- name: does not hold
  pod: TESTDATA/pod.yaml
  nodes: TESTDATA/nodes.yaml
  expect:
    nodes:
      k8s-node1: {code: Success}
      k8s-node3: {reason: "pinned"}
    selected: k8s-node1
- name: default settings
  policies: [{module: MODULE, name: nodepin}]
  pod: TESTDATA/pod.yaml
  nodes: TESTDATA/nodes.yaml
  expect:
    nodes:
      k8s-node1: {code: Success, score: null}
    selected: k8s-node1
`)
	if !res[0].Passed() || res[0].Report == nil {
		t.Errorf("holds: %+v", res[0].Mismatches)
	}
	want := []Mismatch{
		{"expect.nodes.k8s-node1", "Success", `UnschedulableAndUnresolvable, reason "nodepin: node is not one of the allowed nodes [k8s-node2, k8s-node3]", not scored`},
		{"expect.nodes.k8s-node3", `reason containing "pinned"`, "Success, score 0"},
		{"expect.selected", "k8s-node1", "k8s-node2"},
	}
	if got := res[1].Mismatches; fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("does not hold: got\n%s\nwant\n%s", show(got), show(want))
	}
	if !res[2].Passed() {
		t.Errorf("default settings: %+v", res[2].Mismatches)
	}
}

// Composition works as in eval: the policies run in order with their
// weights and failure policies, and failures are expected like outcomes.
func TestRunComposedFailures(t *testing.T) {
	res := run(t, &Runner{}, `
policies:
- {module: MODULE, name: nodepin, settingsFile: TESTDATA/settings.json}
- {module: PROBE, name: probe, settings: {scoreLabel: kubernetes.io/hostname}}
scenarios:
- name: a Score failure fails the cycle
  pod: TESTDATA/pod.yaml
  nodes: TESTDATA/nodes.yaml
  expect:
    error: "probe: policy failed (failurePolicy Fail)"
    failure: 'label kubernetes.io/hostname="k8s-node2" is not an integer'
    selected: ""
- name: under Ignore the probe is left out
  policies:
  - {module: MODULE, name: nodepin, settingsFile: TESTDATA/settings.json}
  - {module: PROBE, name: probe, settings: {scoreLabel: kubernetes.io/hostname}, failurePolicy: Ignore, weight: 5}
  pod: TESTDATA/pod.yaml
  nodes: TESTDATA/nodes.yaml
  expect:
    error: ""
    failure: "is not an integer"
    selected: k8s-node2
- name: a failure not expected
  pod: TESTDATA/pod.yaml
  nodes: TESTDATA/nodes.yaml
  expect:
    error: ""
- name: settings refused, as expected
  policies: [{module: PROBE, name: probe, settings: {rejectSettings: true}}]
  pod: TESTDATA/pod.yaml
  nodes: TESTDATA/nodes.yaml
  expect:
    failure: "settings rejected on request"
- name: a module not built
  policies: [{module: nowhere/gone.wasm}]
  pod: TESTDATA/pod.yaml
  nodes: TESTDATA/nodes.yaml
  expect:
    selected: k8s-node1
`)
	for i := range 2 {
		if !res[i].Passed() {
			t.Errorf("%s: %s", res[i].Scenario.Name, show(res[i].Mismatches))
		}
	}
	if m := res[2].Mismatches; len(m) != 1 || m[0].Field != "expect.error" || !strings.Contains(m[0].Got, "policy failed") {
		t.Errorf("a failure not expected: %s", show(m))
	}
	if !res[3].Passed() || res[3].LoadErr == nil {
		t.Errorf("settings refused: load error %v, %s", res[3].LoadErr, show(res[3].Mismatches))
	}
	wantGone := regexp.MustCompile(`^policy gone: module .*/nowhere/gone.wasm does not exist: build it first, or name another with --policy NAME=PATH$`)
	if m := res[4].Mismatches; len(m) != 1 || m[0].Field != "policies" || !wantGone.MatchString(m[0].Got) {
		t.Errorf("a module not built: %s", show(m))
	}
}

// Runner.Modules runs a policy from another module than the file names,
// by the policy's name.
func TestRunModuleOverride(t *testing.T) {
	file := `
scenarios:
- name: s
  policies: [{module: ../../bin/policies/nodepin.tinygo.wasm}]
  pod: TESTDATA/pod.yaml
  nodes: TESTDATA/nodes.yaml
  expect: {selected: k8s-node1, failure: ""}
`
	res := run(t, &Runner{Modules: map[string]string{"nodepin": testwasm.Path(t, "examples/nodepin")}}, file)
	if !res[0].Passed() {
		t.Errorf("with the module replaced: %s", show(res[0].Mismatches))
	}
	dir := write(t, map[string]string{"s.yaml": strings.ReplaceAll(file, "TESTDATA", filepath.Join(testwasm.Root(t), "examples", "nodepin", "testdata"))})
	f, err := ReadFile(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := UnusedModules([]*File{f}, map[string]string{"nodepin": "x", "nodepine": "y", "gpu": "z"}); fmt.Sprint(got) != "[gpu nodepine]" {
		t.Errorf("unused modules %v", got)
	}
	if got := Select([]*File{f}, regexp.MustCompile(`s.yaml/s$`)); len(got) != 1 {
		t.Errorf("select: %d scenarios", len(got))
	}
	if got := Select([]*File{f}, regexp.MustCompile(`other`)); len(got) != 0 {
		t.Errorf("select: %d scenarios", len(got))
	}
}

// A group no placement holds gets the reasons of the policies'
// PodGroupPostFilter (groupprobe's modes), or their nominations; a
// PodGroupPostFilter that traps or overruns its deadline is a failure
// with the error among the reasons, unless failurePolicy Ignore.
func TestRunGroupPostFilter(t *testing.T) {
	file := strings.ReplaceAll(`
policies:
- {module: MODULE, name: nodepin, settings: {nodes: [nowhere]}}
- {module: GROUPPROBE, name: groupprobe, settings: {postFilter: reject}}
scenarios:
- name: every placement rejected, the reason given
  podGroup: {apiVersion: scheduling.k8s.io/v1beta1, kind: PodGroup, metadata: {name: g, namespace: default}, spec: {schedulingPolicy: {gang: {minCount: 2}}}}
  members: [{metadata: {name: m0}}, {metadata: {name: m1}}]
  nodes: TESTDATA/nodes.yaml
  expect:
    placement:
      selected: ""
      reason: "0/1 placements are available; policy groupprobe: groupprobe: group default/g of 2 pods fits none of 3 nodes"
    failure: ""
- name: the rejection at PlacementGenerate reaches PodGroupPostFilter
  policies:
  - {module: GROUPPROBE, name: groupprobe, settings: {generate: reject, postFilter: reject}}
  podGroup: {apiVersion: scheduling.k8s.io/v1beta1, kind: PodGroup, metadata: {name: g, namespace: default}, spec: {schedulingPolicy: {gang: {minCount: 2}}}}
  members: [{metadata: {name: m0}}, {metadata: {name: m1}}]
  nodes: TESTDATA/nodes.yaml
  expect:
    placement:
      selected: ""
      reason: "groupprobe: no placement for default/g; policy groupprobe: groupprobe: group default/g of 2 pods fits none of 3 nodes after policy groupprobe: groupprobe: no placement for default/g"
- name: nominated
  policies:
  - {module: MODULE, name: nodepin, settings: {nodes: [nowhere]}}
  - {module: GROUPPROBE, name: groupprobe, settings: {postFilter: nominate}}
  podGroup: {apiVersion: scheduling.k8s.io/v1beta1, kind: PodGroup, metadata: {name: g, namespace: default}, spec: {schedulingPolicy: {gang: {minCount: 2}}}}
  members: [{metadata: {name: m0}}, {metadata: {name: m1}}]
  nodes: TESTDATA/nodes.yaml
  expect:
    placement: {selected: "", nominated: {m0: k8s-node1, m1: k8s-node1}}
- name: a trap
  policies:
  - {module: MODULE, name: nodepin, settings: {nodes: [nowhere]}}
  - {module: GROUPPROBE, name: groupprobe, settings: {postFilter: panic}}
  podGroup: {apiVersion: scheduling.k8s.io/v1beta1, kind: PodGroup, metadata: {name: g, namespace: default}, spec: {schedulingPolicy: {gang: {minCount: 2}}}}
  members: [{metadata: {name: m0}}, {metadata: {name: m1}}]
  nodes: TESTDATA/nodes.yaml
  expect:
    placement: {selected: "", reason: "pod_group_post_filter: wasm error: unreachable"}
    failure: "panic: groupprobe: panic in PodGroupPostFilter"
- name: a timeout, ignored
  policies:
  - {module: MODULE, name: nodepin, settings: {nodes: [nowhere]}}
  - {module: GROUPPROBE, name: groupprobe, settings: {postFilter: loop}, failurePolicy: Ignore}
  podGroup: {apiVersion: scheduling.k8s.io/v1beta1, kind: PodGroup, metadata: {name: g, namespace: default}, spec: {schedulingPolicy: {gang: {minCount: 2}}}}
  members: [{metadata: {name: m0}}, {metadata: {name: m1}}]
  nodes: TESTDATA/nodes.yaml
  expect:
    placement: {selected: "", reason: "0/1 placements are available"}
    failure: ""
- name: a timeout
  policies:
  - {module: MODULE, name: nodepin, settings: {nodes: [nowhere]}}
  - {module: GROUPPROBE, name: groupprobe, settings: {postFilter: loop}}
  podGroup: {apiVersion: scheduling.k8s.io/v1beta1, kind: PodGroup, metadata: {name: g, namespace: default}, spec: {schedulingPolicy: {gang: {minCount: 2}}}}
  members: [{metadata: {name: m0}}, {metadata: {name: m1}}]
  nodes: TESTDATA/nodes.yaml
  expect:
    placement: {selected: "", reason: "pod_group_post_filter: deadline of 200ms exceeded"}
    failure: "deadline of 200ms exceeded"
`, "GROUPPROBE", testwasm.Path(t, "test/guests/groupprobe"))
	res := run(t, &Runner{}, file)
	for _, r := range res {
		if !r.Passed() {
			t.Errorf("%s: %s", r.Scenario.Name, show(r.Mismatches))
		}
	}
	if pf := res[0].Group.PostFilter; pf == nil || pf.Code != "Unschedulable" {
		t.Errorf("post filter %+v, want Unschedulable", pf)
	}
	if pf := res[3].Group.PostFilter; pf == nil || pf.Code != "Error" {
		t.Errorf("post filter of a trap %+v, want Error", pf)
	}
}
