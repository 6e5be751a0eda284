package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// eval --objects gives a policy that reads cluster context its objects and
// the placed pods' tenant usage; without a binding it would fail every
// cycle, and a bad objects file is one line naming the document.
func TestEvalObjects(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	probe := testwasm.Path(t, "test/guests/probe")
	cfg := write("settings.json", `{"context": ["v1/namespaces", "scheduling.x-k8s.io/v1alpha1/elasticquotas"], "namespaceUsage": true}`)
	objects := write("objects.yaml", `apiVersion: v1
kind: Namespace
metadata: {name: default}
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: ElasticQuota
metadata: {name: q, namespace: default}
spec: {max: {cpu: "4"}}
`)
	pod, nodes := testdata(t, "pod.yaml"), testdata(t, "nodes.yaml")
	code, out, errs := runCLI("eval", "--policy", probe, "--config", cfg, "--pod", pod, "--nodes", nodes, "--objects", objects, "-o", "json")
	if code != 0 || !strings.Contains(out, `"selected":"k8s-node1"`) {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	if errs != "" {
		t.Errorf("stderr with every kind given: %q", errs)
	}
	// A kind declared and not given: the run says so.
	code, _, errs = runCLI("eval", "--policy", probe, "--config", cfg, "--pod", pod, "--nodes", nodes, "-o", "json")
	if code != 0 || !strings.Contains(errs, "wasmsched eval: warning: policy test_guests_probe reads v1/namespaces, and no --objects is given: it sees no such object (--objects objects.yaml gives them)\n") ||
		!strings.Contains(errs, "reads scheduling.x-k8s.io/v1alpha1/elasticquotas, and no --objects is given") {
		t.Fatalf("eval without --objects: exit %d, stderr %q", code, errs)
	}
	onlyNS := write("ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n")
	code, _, errs = runCLI("eval", "--policy", probe, "--config", cfg, "--pod", pod, "--nodes", nodes, "--objects", onlyNS, "-o", "json")
	if code != 0 || errs != "wasmsched eval: warning: policy test_guests_probe reads scheduling.x-k8s.io/v1alpha1/elasticquotas, and --objects holds none: it sees no such object\n" {
		t.Fatalf("eval with --objects lacking a kind: exit %d, stderr %q", code, errs)
	}
	bad := write("bad.yaml", "apiVersion: v1\nmetadata: {name: x}\n")
	code, _, errs = runCLI("eval", "--policy", probe, "--config", cfg, "--pod", pod, "--nodes", nodes, "--objects", bad)
	if code == 0 || !strings.Contains(errs, "bad.yaml: document 1 is an object without kind") {
		t.Fatalf("exit %d: %s", code, errs)
	}

	// The same in a scenario file.
	scenario := write("ctx.yaml", `policies:
- {name: probe, module: `+probe+`, settingsFile: settings.json}
scenarios:
- name: objects
  pod: `+pod+`
  nodes: `+nodes+`
  objects:
  - objects.yaml
  - {apiVersion: v1, kind: Namespace, metadata: {name: other}}
  expect:
    selected: k8s-node1
`)
	code, out, errs = runCLI("test", scenario)
	if code != 0 {
		t.Fatalf("test: exit %d: %s%s", code, out, errs)
	}
}
