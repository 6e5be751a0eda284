package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/demo"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// The author's additions to the scaffold: pods of a namespace labelled
// example.com/exempt=true pass the filter on any node. The policy reads a
// cluster object (the pod's Namespace), declared in Policy.Context.
const (
	exemptMain = `
var kinds = []guest.Kind{guest.KindNamespace}

// exempt: the pod's namespace is labelled example.com/exempt=true (a
// missing namespace reads as one without labels).
func exempt(c *guest.Cycle) bool {
	v, _ := c.Namespace(c.Pod.Namespace()).Label("example.com/exempt")
	return v == "true"
}
`
	exemptFilter = `Filter: func(c *guest.Cycle, n *guest.NodeInfo) guest.Status {
			if exempt(c) {
				return guest.OK()
			}
			return policy.Filter(c, n)
		},
		Context: kinds,`
	exemptTest = `package main

import (
	"testing"

	"github.com/wasmsched/wasmsched/guest"
	"github.com/wasmsched/wasmsched/guest/guesttest"
)

func TestExempt(t *testing.T) {
	pod := guesttest.MakePod().Namespace("ml").Name("train").Obj()
	n := node("a", "batch", 1000)
	labelled := guesttest.MakeCluster().
		Object("{apiVersion: v1, kind: Namespace, metadata: {name: ml, labels: {example.com/exempt: \"true\"}}}").
		Cycle(pod, kinds, n)
	if !exempt(labelled) {
		t.Fatal("a pod of a labelled namespace is not exempt")
	}
	if exempt(guesttest.MakeCluster().Cycle(pod, kinds, n)) {
		t.Fatal("a pod of a missing namespace is exempt")
	}
	_ = guest.OK
}
`
	exemptScenarios = `policies:
- module: ../NAME.wasm
scenarios:
- name: an exempt namespace passes on any node
  pod: {metadata: {name: train, namespace: ml}, spec: {containers: [{name: c, image: x}]}}
  nodes:
  - metadata: {name: batch-1, labels: {example.com/pool: batch}}
    status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
  objects:
  - {apiVersion: v1, kind: Namespace, metadata: {name: ml, labels: {example.com/exempt: "true"}}}
  expect:
    selected: batch-1
- name: another namespace does not
  pod: {metadata: {name: web, namespace: shop}, spec: {containers: [{name: c, image: x}]}}
  nodes:
  - metadata: {name: batch-1, labels: {example.com/pool: batch}}
    status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
  objects:
  - {apiVersion: v1, kind: Namespace, metadata: {name: shop}}
  expect:
    nodes:
      batch-1: {code: Unschedulable, reason: "not one of [general]"}
`
)

// demoSteps returns the commands between <!-- demo --> and <!-- /demo -->
// in a scaffolded project's README, as readmeLifecycle reads README.md's.
func demoSteps(t *testing.T, readme string) (kubeconfig string, steps []lifecycleStep) {
	t.Helper()
	_, rest, ok := strings.Cut(readme, "<!-- demo -->")
	block, _, ok2 := strings.Cut(rest, "<!-- /demo -->")
	if !ok || !ok2 {
		t.Fatal("the scaffold's README has no <!-- demo --> block")
	}
	var lines []string
	cont := false
	for _, l := range strings.Split(block, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "```") {
			continue
		}
		if cont {
			lines[len(lines)-1] += " " + strings.TrimSuffix(l, "\\")
		} else {
			lines = append(lines, strings.TrimSuffix(l, "\\"))
		}
		cont = strings.HasSuffix(l, "\\")
	}
	for _, l := range lines {
		cmd, comment, _ := strings.Cut(l, " #")
		words := strings.Fields(cmd)
		for i, w := range words {
			words[i] = strings.Trim(w, "'")
		}
		switch {
		case len(words) == 2 && words[0] == "export":
			kubeconfig = strings.TrimPrefix(words[1], "KUBECONFIG=")
		case len(words) > 0 && (words[0] == "wasmsched" || words[0] == "make"):
			steps = append(steps, lifecycleStep{args: words, comment: strings.TrimSpace(comment)})
		default:
			t.Fatalf("the scaffold's README demo block: unexpected line %q", l)
		}
	}
	return kubeconfig, steps
}

// walkNewPolicy walks the documented path of a new policy on the demo's
// cluster (TestREADMELifecycle's): wasmsched new, a rule that reads a
// cluster object with its unit test and scenarios, make test, then the
// scaffold README's "Run it on the demo cluster" commands as shown (with
// --context for the kind read, as the README says): a new SchedulingPolicy
// the demo's profile selects, pods it places, a settings change that
// status shows as a new revision, and a rollback.
func walkNewPolicy(t *testing.T, cp *controlplane.ControlPlane, pc *policyClient) {
	ctx := context.Background()
	root := testwasm.Root(t)
	const name = "teamzone"
	dir := filepath.Join(t.TempDir(), name)
	if code, out, errs := runCLI("new", "--sdk", root, "--dir", dir, name); code != 0 {
		t.Fatalf("wasmsched new: exit %d\n%s%s", code, out, errs)
	}
	edit := func(file, old, new string) {
		t.Helper()
		path := filepath.Join(dir, file)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if old != "" && !strings.Contains(string(b), old) {
			t.Fatalf("%s has no %q", file, old)
		}
		s := string(b) + new
		if old != "" {
			s = strings.Replace(string(b), old, new, 1)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("main.go", "", exemptMain)
	edit("main.go", "Filter:         func(c *guest.Cycle, n *guest.NodeInfo) guest.Status { return policy.Filter(c, n) },", exemptFilter)
	if err := os.WriteFile(filepath.Join(dir, "exempt_test.go"), []byte(exemptTest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scenarios", "exempt.yaml"), []byte(strings.ReplaceAll(exemptScenarios, "NAME", name)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := inProject(t, dir, nil, "make", "test", "WASMSCHED="+testwasm.CLI(t)); !strings.Contains(out, "5 passed, 0 failed") {
		t.Fatalf("make test of the policy reading namespaces:\n%s", out)
	}

	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "add `--context v1/namespaces`, one per kind, to its push") {
		t.Fatal("the scaffold's README no longer says how to allow a kind the policy reads")
	}
	kubeconfigShown, steps := demoSteps(t, string(readme))
	if kubeconfigShown != filepath.Join(os.TempDir(), "wasmsched-up", "kubeconfig") || len(steps) != 6 {
		t.Fatalf("the scaffold's README: kubeconfig %q, %d commands", kubeconfigShown, len(steps))
	}

	// The demo's nodes; the scheduler runs the demo's profile.
	c := cp.Client()
	for _, ns := range []*v1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: demo.Namespace}},
		{ObjectMeta: metav1.ObjectMeta{Name: "research", Labels: map[string]string{"example.com/exempt": "true"}}},
	} {
		if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range demo.Nodes() {
		if _, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Pushed without the profile's label, as the author first did: the
	// scheduler's published selection makes push --wait refuse at once,
	// naming the label to add, and write nothing.
	code, out, errs := runCLI("push", filepath.Join(dir, name+".wasm"), "--name", "stray", "--namespace", demo.PolicyNamespace,
		"--context", "v1/namespaces", "--wait", "1m")
	if code != 1 || !regexp.MustCompile(`^wasmsched push: no scheduler profile selects schedulingpolicy stray: profile default-scheduler \(replica [^)]+\) selects the labels wasmsched.io/profile=wasmsched; push it with --label wasmsched.io/profile=wasmsched, nothing written`).MatchString(errs) {
		t.Fatalf("push --wait of a policy no profile selects: exit %d\n%s%s", code, out, errs)
	}

	var statuses []string
	for i, st := range steps {
		args := append([]string(nil), st.args...)
		if args[0] == "make" {
			inProject(t, dir, nil, args[0], args[1:]...)
			continue
		}
		args = args[1:]
		for j, a := range args {
			if a == name+".wasm" {
				args[j] = filepath.Join(dir, a)
			}
		}
		if i == 1 {
			// The first push, with the kind the policy reads allowed,
			// as the README says.
			args = append(args, "--context", "v1/namespaces")
		}
		code, out, errs := runCLI(args...)
		t.Logf("demo step %d: wasmsched %s\n%s%s", i+1, strings.Join(args, " "), out, errs)
		if code != 0 || strings.Contains(errs, "warning") {
			t.Fatalf("demo step %d (%s): exit %d\n%s%s", i+1, strings.Join(args, " "), code, out, errs)
		}
		switch args[0] {
		case "status":
			statuses = append(statuses, out)
		case "push":
			if i == 1 {
				// Placed by the new policy and the demo's: any zone.
				pc.waitProven(name)
				place(t, c, demo.Namespace, "web-any", nil, "")
			} else {
				// Only zone-a now; an exempt namespace's pod anywhere
				// (the policy read the Namespace's label).
				place(t, c, demo.Namespace, "web-a", nil, "zone-a")
				place(t, c, "research", "train-c", map[string]string{"topology.kubernetes.io/zone": "zone-c"}, "zone-c")
			}
		}
	}

	// status told the revisions apart: the settings change served a new
	// revision of the same module, its settings shown.
	if len(statuses) != 2 {
		t.Fatalf("%d status outputs", len(statuses))
	}
	row := regexp.MustCompile(`(?m)^` + name + ` +Enforce +([0-9a-f]{16}) +([0-9a-f]{16}) +\S+ +([0-9a-f]{16}|-) +True +Serving`)
	first, second := row.FindStringSubmatch(statuses[0]), row.FindStringSubmatch(statuses[1])
	if first == nil || second == nil {
		t.Fatalf("status does not show %s serving its spec:\n%s\n%s", name, statuses[0], statuses[1])
	}
	if first[2] != first[1] || second[2] != second[1] || second[2] == first[2] {
		t.Fatalf("status: serving %s then %s, want the spec's revision each time and a new one after the settings change", first[2], second[2])
	}
	if !strings.Contains(statuses[1], `spec, serving `+second[2]+`: module `) || !strings.Contains(statuses[1], `settings {"label":"topology.kubernetes.io/zone","values":["zone-a"]}, context v1/namespaces`) {
		t.Fatalf("status after the settings change does not show the new revision's settings:\n%s", statuses[1])
	}
	// The rollback serves the first revision again.
	sp := pc.get(name)
	if sp.Status.Serving == nil || sp.Status.Serving.Key != first[2] || sp.Labels[demo.ProfileLabel] != demo.ProfileValue {
		t.Fatalf("after the rollback %+v serves (labels %v), want %s", sp.Status.Serving, sp.Labels, first[2])
	}
}

// place creates a pod and waits until it is bound, in zone when set.
func place(t *testing.T, c kubernetes.Interface, namespace, name string, nodeSelector map[string]string, zone string) {
	t.Helper()
	ctx := context.Background()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1.PodSpec{NodeSelector: nodeSelector, Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}}}
	if _, err := c.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *v1.Pod
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = c.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil && got.Spec.NodeName != "", err
	})
	if err != nil {
		t.Fatalf("pod %s/%s not bound: %v (conditions %+v)", namespace, name, err, got.Status.Conditions)
	}
	if zone == "" {
		return
	}
	node, err := c.CoreV1().Nodes().Get(ctx, got.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if z := node.Labels["topology.kubernetes.io/zone"]; z != zone {
		t.Fatalf("pod %s/%s placed on %s in %s, want %s", namespace, name, node.Name, z, zone)
	}
}
