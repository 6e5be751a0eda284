package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/host/eval"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// wasmsched eval --pod-group runs the group's pod-group cycle: the
// placements tried, the one chosen and each member's node, as a table or
// JSON.
func TestEvalPodGroup(t *testing.T) {
	dir := filepath.Join(testwasm.Root(t), "examples", "topology", "testdata")
	args := []string{"eval", "--policy", testwasm.Path(t, "examples/gpu"), "--policy", testwasm.Path(t, "examples/topology"),
		"--pod-group", filepath.Join(dir, "objects-podgroups.yaml"), "--pod", filepath.Join(dir, "pod-train.yaml"), "--nodes", filepath.Join(dir, "nodes.yaml")}
	code, out, errs := runCLI(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := `pod group ml/train
placement nvidia.com/gpu.clique=clique-a [gb200-a-1,gb200-a-2]: feasible, score 100
placement nvidia.com/gpu.clique=clique-b [gb200-b-1,gb200-b-2,gb200-b-3,gb200-b-4]: feasible, score 0
selected nvidia.com/gpu.clique=clique-a: train-0=gb200-a-1 train-1=gb200-a-1 train-2=gb200-a-2 train-3=gb200-a-2
`
	if out != want {
		t.Fatalf("output\n%s\nwant\n%s", out, want)
	}
	code, out, errs = runCLI(append(args, "-o", "json")...)
	var rep eval.GroupReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("exit %d, %s: %s", code, errs, out)
	}
	if rep.PodGroup != "ml/train" || rep.Selected != "nvidia.com/gpu.clique=clique-a" || len(rep.Placements) != 2 || rep.Assignments["train-3"] != "gb200-a-2" || rep.PostFilter != nil {
		t.Errorf("report %+v", rep)
	}
}

// A group no placement holds: the reasons, with the policies'
// PodGroupPostFilter's (groupprobe's modes); a PodGroupPostFilter that traps
// fails the run (exit 1) with the trap on stderr, as the scheduler fails
// the group's cycle.
func TestEvalPodGroupPostFilter(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	group := write("group.yaml", "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g, namespace: default}\nspec: {schedulingPolicy: {gang: {minCount: 2}}}\n")
	members := write("members.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: m0}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: m1}\n")
	nowhere := write("nowhere.json", `{"nodes": ["nowhere"]}`)
	probe := testwasm.Path(t, "test/guests/groupprobe")
	cli := func(mode string) (int, string, string) {
		return runCLI("eval", "--policy", testwasm.Path(t, "examples/nodepin"), "--config", nowhere,
			"--policy", probe, "--config", write(mode+".json", `{"postFilter": "`+mode+`"}`),
			"--pod-group", group, "--pod", members, "--nodes", testdata(t, "nodes.yaml"))
	}
	code, out, errs := cli("reject")
	want := `pod group default/g
placement - [k8s-node1,k8s-node2,k8s-node3]: not feasible: 0 of 2 members placed, 2 needed; m0: nodepin: node is not one of the allowed nodes [nowhere]; m1: nodepin: node is not one of the allowed nodes [nowhere]
no placement: 0/1 placements are available; policy test_guests_groupprobe: groupprobe: group default/g of 2 pods fits none of 3 nodes
pod group post filter: Unschedulable
`
	if code != 0 || out != want {
		t.Fatalf("exit %d (%s), output\n%s\nwant\n%s", code, errs, out, want)
	}
	code, out, _ = cli("nominate")
	if code != 0 || !strings.HasSuffix(out, "pod group post filter: Success, nominated m0=k8s-node1 m1=k8s-node1\n") {
		t.Fatalf("exit %d, output\n%s", code, out)
	}
	code, out, errs = cli("panic")
	wantErr := regexp.MustCompile(`^wasmsched eval: policy test_guests_groupprobe@[0-9a-f]{12}: pod_group_post_filter: wasm error: unreachable: panic: groupprobe: panic in PodGroupPostFilter\n$`)
	if code != 1 || !wantErr.MatchString(errs) || !strings.Contains(out, "pod group post filter: Error\npolicy failure: ") {
		t.Fatalf("exit %d, stderr %q, output\n%s", code, errs, out)
	}
}

// Bad pod-group input exits non-zero with one line naming what is wrong.
func TestEvalPodGroupBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	wasm := testwasm.Path(t, "examples/nodepin")
	nodes := testdata(t, "nodes.yaml")
	group := write("group.yaml", "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g, namespace: ml}\n")
	two := write("two.yaml", "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g}\n---\napiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: h}\n")
	zero := write("zero.yaml", "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g}\nspec: {schedulingPolicy: {gang: {minCount: 0}}}\n")
	ml := write("ml.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: m0, namespace: ml}\n")
	twice := write("twice.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: m0, namespace: ml}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: m0, namespace: ml}\n")
	other := write("other.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: m0, namespace: ml}\nspec: {schedulingGroup: {podGroupName: h}}\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a node as the group", []string{"--pod-group", nodes, "--pod", ml}, `^wasmsched eval: --pod-group .*nodes.yaml: holds 3 objects, want one PodGroup$`},
		{"two groups", []string{"--pod-group", two, "--pod", ml}, `^wasmsched eval: --pod-group .*two.yaml: holds 2 objects, want one PodGroup$`},
		{"minCount 0", []string{"--pod-group", zero, "--pod", ml}, `^wasmsched eval: --pod-group .*zero.yaml: PodGroup g: spec.schedulingPolicy.gang.minCount must be a positive integer$`},
		{"another namespace", []string{"--pod-group", group, "--pod", testdata(t, "pod.yaml")}, `^wasmsched eval: --pod .*pod.yaml: pod web is in namespace default, the PodGroup g in ml$`},
		{"a member twice", []string{"--pod-group", group, "--pod", twice}, `^wasmsched eval: --pod .*twice.yaml: pod m0 is listed twice$`},
		{"a member of another group", []string{"--pod-group", group, "--pod", other}, `^wasmsched eval: --pod .*other.yaml: pod m0 belongs to PodGroup h \(spec.schedulingGroup\), not g$`},
		{"no members", []string{"--pod-group", group}, `^wasmsched eval: no --pod given$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(append([]string{"eval", "--policy", wasm, "--nodes", nodes}, tc.args...)...)
			lines := strings.Split(strings.TrimRight(errs, "\n"), "\n")
			if code == 0 || len(lines) != 1 || !regexp.MustCompile(tc.want).MatchString(lines[0]) {
				t.Fatalf("exit %d, stderr %q, stdout %q; want one line matching %s", code, errs, out, tc.want)
			}
		})
	}
}

// The guide's pod-group eval example is real: same command, same output.
func TestGuideEvalPodGroup(t *testing.T) {
	root := testwasm.Root(t)
	guide, err := os.ReadFile(filepath.Join(root, "guest", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const cmd = "bin/wasmsched eval --policy bin/policies/gpu.wasm --policy bin/policies/topology.wasm \\\n" +
		"  --pod-group examples/topology/testdata/objects-podgroups.yaml \\\n" +
		"  --pod examples/topology/testdata/pod-train.yaml \\\n" +
		"  --nodes examples/topology/testdata/nodes.yaml\n```\n\n```text\n"
	_, block, ok := strings.Cut(string(guide), cmd)
	if !ok {
		t.Fatal("guest/README.md has no pod-group eval example (or it changed: change this test with it)")
	}
	want, _, _ := strings.Cut(block, "```")
	dir := filepath.Join(root, "examples", "topology", "testdata")
	code, got, errs := runCLI("eval", "--policy", testwasm.Path(t, "examples/gpu"), "--policy", testwasm.Path(t, "examples/topology"),
		"--pod-group", filepath.Join(dir, "objects-podgroups.yaml"), "--pod", filepath.Join(dir, "pod-train.yaml"), "--nodes", filepath.Join(dir, "nodes.yaml"))
	if code != 0 || got != want {
		t.Fatalf("exit %d (%s); the guide shows\n%s\nthe command prints\n%s", code, errs, want, got)
	}
}
