package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// write writes files into a new directory and returns it.
func write(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const (
	nodesYAML = `apiVersion: v1
kind: Node
metadata: {name: n1}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
`
	podYAML = `apiVersion: v1
kind: Pod
metadata: {name: web}
spec: {containers: [{name: c, image: nginx}]}
`
)

// Everything a file says is read: default policies and a scenario's own,
// settings inline and from a file, file references and inline objects,
// expectations in both node forms.
func TestReadFile(t *testing.T) {
	dir := write(t, map[string]string{
		"nodes.yaml": nodesYAML,
		"pod.yaml":   podYAML,
		"s.json":     `{"nodes": ["n2"]}`,
		"a.yaml": `
policies:
- module: p.wasm
  settings: {nodes: [n1, n2]}
scenarios:
- name: defaults
  pod: pod.yaml
  nodes: nodes.yaml
  expect:
    nodes:
      n2: {code: Unschedulable, reason: "no", score: null}
      n1: Success
    order: [n1]
    selected: n1
    nominated:
    permit: {code: Wait, reason: gang, wait: 1m}
    error: ""
    failure: boom
- name: own policies
  policies:
  - {module: /abs/q.tinygo.wasm, settingsFile: s.json, weight: 3, failurePolicy: Ignore}
  - {module: p.wasm, name: other}
  pod: {metadata: {name: inline, namespace: ns}}
  nodes:
  - nodes.yaml
  - {metadata: {name: n3}, status: {allocatable: {cpu: "2"}}}
  pods:
  - {metadata: {name: placed}, spec: {nodeName: n3}}
  expect: {selected: n3}
`,
	})
	f, err := ReadFile(filepath.Join(dir, "a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Scenarios) != 2 {
		t.Fatalf("%d scenarios", len(f.Scenarios))
	}
	s := f.Scenarios[0]
	if s.ID() != filepath.Join(dir, "a.yaml")+"/defaults" {
		t.Errorf("ID %q", s.ID())
	}
	if len(s.Policies) != 1 || s.Policies[0].Name != "p" || s.Policies[0].Module != filepath.Join(dir, "p.wasm") ||
		string(s.Policies[0].Settings) != `{"nodes":["n1","n2"]}` {
		t.Errorf("default policies %+v", s.Policies)
	}
	if s.Input.Pod.Name != "web" || s.Input.Pod.Namespace != "default" || len(s.Input.Nodes) != 2 {
		t.Errorf("input: pod %s/%s, %d nodes", s.Input.Pod.Namespace, s.Input.Pod.Name, len(s.Input.Nodes))
	}
	e := s.Expect
	if len(e.Nodes) != 2 || e.Nodes[0].Node != "n1" || e.Nodes[0].Code != "Success" ||
		e.Nodes[1].Node != "n2" || e.Nodes[1].Code != "Unschedulable" || e.Nodes[1].Reason != "no" || !e.Nodes[1].Unscored {
		t.Errorf("node expectations (in the nodes' order) %+v", e.Nodes)
	}
	if *e.Selected != "n1" || e.Nominated == nil || *e.Nominated != "" || *e.Error != "" || *e.Failure != "boom" ||
		e.Permit.Code != "Wait" || e.Permit.Wait.String() != "1m0s" || len(e.Order) != 1 {
		t.Errorf("expect %+v, permit %+v", e, e.Permit)
	}

	s = f.Scenarios[1]
	q := s.Policies[0]
	if q.Name != "q" || q.Module != "/abs/q.tinygo.wasm" || string(q.Settings) != `{"nodes": ["n2"]}` || q.Weight != 3 || q.FailurePolicy != "Ignore" {
		t.Errorf("policy %+v", q)
	}
	if s.Policies[1].Name != "other" {
		t.Errorf("named policy %+v", s.Policies[1])
	}
	if s.Input.Pod.Name != "inline" || len(s.Input.Nodes) != 3 || s.Input.Nodes[2].Name != "n3" || len(s.Input.Pods) != 1 {
		t.Errorf("inline input: pod %s, nodes %d, pods %d", s.Input.Pod.Name, len(s.Input.Nodes), len(s.Input.Pods))
	}
	if e := s.Expect; e.Nodes != nil || e.Selected == nil || e.Nominated != nil || e.Permit != nil || e.Error != nil || e.Failure != nil {
		t.Errorf("unstated expectations must stay nil: %+v", e)
	}
}

// A file that is not valid gives one line per problem, each naming the
// file, the scenario and the field, and no scenarios.
func TestReadFileErrors(t *testing.T) {
	files := map[string]string{"nodes.yaml": nodesYAML, "pod.yaml": podYAML}
	const head = "policies: [{module: p.wasm}]\nscenarios:\n"
	for _, tc := range []struct {
		name, file string
		want       []string // the error's lines, after "FILE: "
	}{
		{"not YAML", "scenarios: [", []string{`not valid YAML: yaml: line 1: did not find expected node content`}},
		{"empty", "", []string{`empty: want policies and scenarios`}},
		{"unknown top-level field", "policy: []\nscenarios: []", []string{`unknown field "policy"`}},
		{"no scenarios", "policies: [{module: p.wasm}]", []string{`scenarios: none: a file lists at least one scenario`}},
		{"no policies", "scenarios:\n- {name: s, pod: pod.yaml, nodes: nodes.yaml, expect: {}}",
			[]string{`scenario "s": policies: none: list them in the scenario or at the top of the file`}},
		{"bad policies", "policies:\n- {module: p.wasm, weight: 101, failurePolicy: fail}\n- {weight: 1}\n- {module: p.wasm}\n- {module: q.wasm, settings: {}, settingsFile: s.json}\n- {module: r.wasm, settingsFile: nope.json}\n" +
			"scenarios:\n- {name: s, pod: pod.yaml, nodes: nodes.yaml, expect: {}}",
			[]string{
				`policies[0].weight: 101 is not in 1..100`,
				`policies[0].failurePolicy: "fail" is neither Fail nor Ignore`,
				`policies[1].module: missing: the policy's .wasm file`,
				`policies[2].name: p is the name of policies[0] too: give one of them another name`,
				`policies[3]: settings and settingsFile both given: use one`,
				`policies[4].settingsFile: open ` + "DIR" + `/nope.json: no such file or directory`,
			}},
		{"unnamed scenario", head + "- {pod: pod.yaml, nodes: nodes.yaml, expect: {}}", []string{`scenarios[0]: name: missing: every scenario has a name`}},
		{"same name twice", head + "- {name: s, pod: pod.yaml, nodes: nodes.yaml, expect: {}}\n- {name: s, pod: pod.yaml, nodes: nodes.yaml, expect: {}}",
			[]string{`scenario "s": name: scenario 1 has the same name: names must be unique in a file`}},
		{"unknown scenario field", head + "- {name: s, pod: pod.yaml, node: nodes.yaml, expect: {}}", []string{`scenario "s": unknown field "node"`}},
		{"missing parts", head + "- {name: s}", []string{
			`scenario "s": pod: missing: the pod to schedule, a file or an inline Pod`,
			`scenario "s": nodes: missing: the nodes, a file or a list of files and inline Nodes`,
			`scenario "s": expect: missing: a scenario states what it expects`,
		}},
		{"bad input", head + "- name: s\n  pod: [pod.yaml]\n  nodes: [nodes.yaml, {metadata: {name: n3}, spec: 3}, 5, nope.yaml]\n  expect: {}", []string{
			`scenario "s": pod: want a file name or an inline Pod`,
			`scenario "s": nodes[1]: json: cannot unmarshal number into Go struct field Node.spec of type v1.NodeSpec`,
			`scenario "s": nodes[2]: want a file name or an inline Node`,
			`scenario "s": nodes[3]: open DIR/nope.yaml: no such file or directory`,
		}},
		{"pods as nodes", head + "- {name: s, pod: pod.yaml, nodes: pod.yaml, expect: {}}", []string{`scenario "s": nodes: DIR/pod.yaml: document 1 is Pod, want Node`}},
		{"placed pod on no node", head + "- {name: s, pod: pod.yaml, nodes: nodes.yaml, pods: [{metadata: {name: p}, spec: {nodeName: n9}}], expect: {}}",
			[]string{`scenario "s": pods: pod default/p is placed on node "n9", which is not among the nodes`}},
		{"bad expectations", head + "- name: s\n  pod: pod.yaml\n  nodes: nodes.yaml\n  expect:\n" +
			"    nodes: {n1: {code: Sucess}, n2: {}, n9: Success}\n    order: [n1, n1, n8]\n    selected: n7\n    nominated: n6\n    permit: {code: Later, wait: soon}",
			[]string{
				`scenario "s": expect.nodes.n9: no node n9 among the scenario's nodes (n1, n2)`,
				`scenario "s": expect.nodes.n1.code: "Sucess" is not a code (Success, Unschedulable, UnschedulableAndUnresolvable, Error, Wait, Skip, Pending)`,
				`scenario "s": expect.nodes.n2: states nothing: give a code, a reason or a score`,
				`scenario "s": expect.order[1]: n1 is listed twice`,
				`scenario "s": expect.order[2]: no node n8 among the scenario's nodes (n1, n2)`,
				`scenario "s": expect.selected: no node n7 among the scenario's nodes (n1, n2)`,
				`scenario "s": expect.nominated: no node n6 among the scenario's nodes (n1, n2)`,
				`scenario "s": expect.permit.code: "Later" is not a code (Success, Unschedulable, UnschedulableAndUnresolvable, Error, Wait, Skip, Pending)`,
				`scenario "s": expect.permit.wait: "soon" is not a duration (such as 30s or 1m)`,
			}},
		{"mistyped expectations", head + "- {name: s, pod: pod.yaml, nodes: nodes.yaml, expect: {nodes: {n1: {score: high}}}}",
			[]string{`scenario "s": expect.nodes.n1.score: a string where an integer was expected`}},
		{"unknown expectation", head + "- {name: s, pod: pod.yaml, nodes: nodes.yaml, expect: {nodes: {n1: {scroe: 1}}}}",
			[]string{`scenario "s": expect.nodes.n1: unknown field "scroe"`}},
		{"list where a mapping goes", head + "- {name: s, pod: pod.yaml, nodes: nodes.yaml, expect: [selected]}",
			[]string{`scenario "s": expect: a list where a mapping was expected`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files["a.yaml"] = tc.file
			dir := write(t, files)
			path := filepath.Join(dir, "a.yaml")
			f, err := ReadFile(path)
			if err == nil {
				t.Fatalf("accepted, %d scenarios", len(f.Scenarios))
			}
			if f != nil {
				t.Errorf("a file with errors gave scenarios")
			}
			var want []string
			for _, w := range tc.want {
				want = append(want, path+": "+strings.ReplaceAll(w, "DIR", dir))
			}
			if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", err, strings.Join(want, "\n"))
			}
		})
	}
}

func TestNameOf(t *testing.T) {
	for in, want := range map[string]string{
		"../bin/policies/gpu.wasm":        "gpu",
		"/x/gpu.tinygo.wasm":              "gpu",
		"examples_nodepin.wasm":           "examples_nodepin",
		"policy":                          "policy",
		"../../../bin/policies/zone.wasm": "zone",
	} {
		if got := NameOf(in); got != want {
			t.Errorf("NameOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFindFiles(t *testing.T) {
	dir := write(t, map[string]string{"b.yaml": "", "a.yml": "", "notes.md": ""})
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "sub", "c.yaml"), nil, 0o644)
	got, err := FindFiles([]string{dir, filepath.Join(dir, "b.yaml"), filepath.Join(dir, "sub", "c.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a.yml"), filepath.Join(dir, "b.yaml"), filepath.Join(dir, "sub", "c.yaml")}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := FindFiles([]string{filepath.Join(dir, "sub", "..", "sub", "none")}); err == nil {
		t.Error("a missing path was accepted")
	}
	empty := t.TempDir()
	if _, err := FindFiles([]string{empty}); err == nil || !strings.Contains(err.Error(), "no scenario files") {
		t.Errorf("a directory without scenario files: %v", err)
	}
}
