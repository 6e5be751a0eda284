package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func TestMain(m *testing.M) { testwasm.Main(m) }

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func testdata(t *testing.T, name string) string {
	return filepath.Join(testwasm.Root(t), "examples", "nodepin", "testdata", name)
}

func TestEvalJSON(t *testing.T) {
	wasm := testwasm.Path(t, "examples/nodepin")
	code, out, errs := runCLI("eval", "--policy", wasm, "--config", testdata(t, "settings.json"),
		"--pod", testdata(t, "pod.yaml"), "--nodes", testdata(t, "nodes.yaml"), "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := `{"pod":"default/web","nodes":[` +
		`{"name":"k8s-node1","code":"UnschedulableAndUnresolvable","reasons":["nodepin: node is not one of the allowed nodes [k8s-node2, k8s-node3]"]},` +
		`{"name":"k8s-node2","code":"Success","reasons":[],"score":0},` +
		`{"name":"k8s-node3","code":"Success","reasons":[],"score":0}],` +
		`"permit":{"code":"Success","reasons":[]},"selected":"k8s-node2"}` + "\n"
	if out != want {
		t.Fatalf("output\n%s\nwant\n%s", out, want)
	}
}

func TestEvalTableAndComposition(t *testing.T) {
	wasm := testwasm.Path(t, "examples/nodepin")
	probe := testwasm.Path(t, "test/guests/probe")
	dir := t.TempDir()
	settings := filepath.Join(dir, "probe.json")
	os.WriteFile(settings, []byte(`{"scoreLabel": "kubernetes.io/hostname"}`), 0o644)
	// nodepin (k8s-node2 and k8s-node3) composed with a probe that fails
	// to score non-numeric labels: the table shows both policies' effects,
	// and the probe's own Error verdict is a policy failure that fails the
	// cycle (exit 1, no node selected), as in the scheduler with
	// failurePolicy Fail.
	code, out, errs := runCLI("eval", "--policy", wasm, "--config", testdata(t, "settings.json"), "--policy", probe, "--config", settings,
		"--pod", testdata(t, "pod.yaml"), "--nodes", testdata(t, "nodes.yaml"))
	wantErr := regexp.MustCompile(`^wasmsched eval: policy test_guests_probe@[0-9a-f]{12}: score: policy reported an error: probe: label kubernetes.io/hostname="k8s-node[23]" is not an integer\n$`)
	if code != 1 || !wantErr.MatchString(errs) {
		t.Fatalf("exit %d, stderr %q; want 1 and one line matching %s", code, errs, wantErr)
	}
	for _, want := range []string{
		"POD        default/web",
		"k8s-node1  UnschedulableAndUnresolvable  -      nodepin: node is not one of the allowed nodes [k8s-node2, k8s-node3]",
		"k8s-node2  Success                       -",
		`FAILED     test_guests_probe: policy failed (failurePolicy Fail): policy test_guests_probe@`,
		"SELECTED   (none)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}

	// With failurePolicy Ignore the probe is left out and nodepin alone
	// decides; the failure is still reported (exit 1).
	code, out, _ = runCLI("eval", "--policy", wasm, "--config", testdata(t, "settings.json"), "--policy", probe, "--config", settings,
		"--failure-policy", "Ignore", "--pod", testdata(t, "pod.yaml"), "--nodes", testdata(t, "nodes.yaml"))
	if code != 1 || !strings.Contains(out, "SELECTED   k8s-node2") || !strings.Contains(out, "k8s-node3  Success                       0") {
		t.Fatalf("exit %d, want 1 and k8s-node2 selected with scores 0:\n%s", code, out)
	}
}

// Bad input exits non-zero with one line naming what is wrong.
func TestEvalBadInput(t *testing.T) {
	pod, nodes := testdata(t, "pod.yaml"), testdata(t, "nodes.yaml")
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	wasm := write("nodepin.wasm", string(testwasm.Bytes(t, "examples/nodepin")))
	notWasm := write("junk.wasm", "this is not wasm")
	badYAML := write("bad.yaml", "kind: Node\nmetadata: [unclosed")
	podsAsNodes := pod
	emptyNodes := write("empty.json", `{"nodes": []}`)
	notJSON := write("bad.json", `{"nodes": [`)
	abi2 := filepath.Join(testwasm.Root(t), "host", "engine", "testdata", "abi_v2.wasm")
	for _, tc := range []struct {
		name string
		args []string
		want string // regexp for the single stderr line
	}{
		{"missing policy file", []string{"--policy", filepath.Join(dir, "nope.wasm"), "--pod", pod, "--nodes", nodes}, `^wasmsched eval: open .*nope.wasm: no such file or directory$`},
		{"not a wasm module", []string{"--policy", notWasm, "--pod", pod, "--nodes", nodes}, `^wasmsched eval: policy junk@[0-9a-f]{12}: not a valid WebAssembly module: .*magic number`},
		{"wrong ABI version", []string{"--policy", abi2, "--pod", pod, "--nodes", nodes}, `^wasmsched eval: policy abi_v2@[0-9a-f]{12}: abi_version: module speaks ABI version 2, this scheduler speaks ABI version 1$`},
		{"bad YAML", []string{"--policy", wasm, "--pod", pod, "--nodes", badYAML}, `^wasmsched eval: .*bad.yaml: document 1: not valid YAML`},
		{"wrong kind", []string{"--policy", wasm, "--pod", pod, "--nodes", podsAsNodes}, `^wasmsched eval: .*pod.yaml: document 1 is Pod, want Node$`},
		{"settings rejected", []string{"--policy", wasm, "--config", emptyNodes, "--pod", pod, "--nodes", nodes}, `^wasmsched eval: policy nodepin@[0-9a-f]{12}: init: settings: "nodes" must list at least one node$`},
		{"settings not JSON", []string{"--policy", wasm, "--config", notJSON, "--pod", pod, "--nodes", nodes}, `^wasmsched eval: .*bad.json: settings are not valid JSON$`},
		{"config before policy", []string{"--config", emptyNodes, "--policy", wasm, "--pod", pod, "--nodes", nodes}, `^wasmsched eval: --config must follow the --policy it configures$`},
		{"no pod", []string{"--policy", wasm, "--nodes", nodes}, `^wasmsched eval: no --pod given$`},
		{"bad output", []string{"--policy", wasm, "--pod", pod, "--nodes", nodes, "-o", "xml"}, `^wasmsched eval: unknown output format "xml" \(want table or json\)$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(append([]string{"eval"}, tc.args...)...)
			if code == 0 {
				t.Fatalf("exit 0, want failure; stdout %q", out)
			}
			lines := strings.Split(strings.TrimRight(errs, "\n"), "\n")
			if len(lines) != 1 || !regexp.MustCompile(tc.want).MatchString(lines[0]) {
				t.Fatalf("stderr %q, want one line matching %s", errs, tc.want)
			}
			if strings.Contains(errs, "goroutine ") || strings.Contains(errs, "panic") {
				t.Fatalf("stderr has a Go trace: %s", errs)
			}
		})
	}
}

// The eval example in the README is real: same command, same output.
func TestREADMEEval(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(testwasm.Root(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	start := strings.Index(s, "bin/wasmsched eval --policy bin/policies/nodepin.wasm")
	if start < 0 {
		t.Fatal("README has no nodepin eval example")
	}
	block := s[start:]
	out := block[strings.Index(block, "```\n```\n")+8:]
	want := out[:strings.Index(out, "```")]

	dir := t.TempDir()
	wasm := filepath.Join(dir, "nodepin.wasm")
	if err := os.WriteFile(wasm, testwasm.Bytes(t, "examples/nodepin"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := testwasm.Root(t)
	code, got, errs := runCLI("eval", "--policy", wasm, "--config", filepath.Join(root, "examples/nodepin/testdata/settings.json"),
		"--pod", filepath.Join(root, "examples/nodepin/testdata/pod.yaml"), "--nodes", filepath.Join(root, "examples/nodepin/testdata/nodes.yaml"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	trim := func(s string) string {
		lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
		for i := range lines {
			lines[i] = strings.TrimRight(lines[i], " ")
		}
		return strings.Join(lines, "\n")
	}
	if trim(got) != trim(want) {
		t.Fatalf("README shows\n%s\nthe command prints\n%s", want, got)
	}
}
