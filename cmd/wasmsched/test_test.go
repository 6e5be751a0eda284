package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// elapsed is the time go test style lines show, which changes every run.
var elapsed = regexp.MustCompile(`\(\d+\.\d\ds\)`)

// scenarioDir writes a scenario file for nodepin into a new directory,
// with a passing and a failing scenario, and returns the directory.
func scenarioDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	file := `policies:
- module: nodepin.wasm
  settingsFile: ` + testdata(t, "settings.json") + `
scenarios:
- name: pins to node2 and node3
  pod: ` + testdata(t, "pod.yaml") + `
  nodes: ` + testdata(t, "nodes.yaml") + `
  expect:
    nodes:
      k8s-node1: {code: UnschedulableAndUnresolvable, reason: "not one of the allowed nodes"}
    selected: k8s-node2
- name: wrong on purpose
  pod: ` + testdata(t, "pod.yaml") + `
  nodes: ` + testdata(t, "nodes.yaml") + `
  expect:
    selected: k8s-node1
    permit: {code: Wait}
`
	if err := os.WriteFile(filepath.Join(dir, "nodepin.yaml"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Output as go test's: a line per scenario, the differences indented under
// a failure, a count; exit 1 when one fails.
func TestTestOutput(t *testing.T) {
	dir := scenarioDir(t)
	file := filepath.Join(dir, "nodepin.yaml")
	// The module the file names is not built: the scenarios say so.
	code, out, errs := runCLI("test", dir)
	if code != 1 || errs != "" || !strings.Contains(out, "    policies:\n        want: loaded\n        got:  policy nodepin: module "+filepath.Join(dir, "nodepin.wasm")+" does not exist: build it first, or name another with --policy NAME=PATH\n") {
		t.Fatalf("without the module: exit %d, stderr %q, stdout\n%s", code, errs, out)
	}

	wasm := "nodepin=" + testwasm.Path(t, "examples/nodepin")
	code, out, errs = runCLI("test", "--policy", wasm, dir)
	want := "--- PASS: " + file + "/pins to node2 and node3 (X)\n" +
		"--- FAIL: " + file + "/wrong on purpose (X)\n" +
		"    expect.selected:\n" +
		"        want: k8s-node1\n" +
		"        got:  k8s-node2\n" +
		"    expect.permit:\n" +
		"        want: Wait\n" +
		"        got:  Success\n" +
		"1 passed, 1 failed\n"
	if got := elapsed.ReplaceAllString(out, "(X)"); code != 1 || got != want || errs != "" {
		t.Fatalf("exit %d, stderr %q, stdout\n%s\nwant exit 1 and\n%s", code, errs, got, want)
	}

	// -run selects by FILE/NAME; flags may follow the paths; -v shows the
	// eval table.
	code, out, _ = runCLI("test", dir, "-run", "nodepin.yaml/pins", "-v", "--policy", wasm)
	want = "=== RUN   " + file + "/pins to node2 and node3\n" +
		"    POD        default/web\n" +
		"    NODE       VERDICT                       SCORE  REASONS\n" +
		"    k8s-node1  UnschedulableAndUnresolvable  -      nodepin: node is not one of the allowed nodes [k8s-node2, k8s-node3]\n" +
		"    k8s-node2  Success                       0\n" +
		"    k8s-node3  Success                       0\n" +
		"    PERMIT     Success\n" +
		"    SELECTED   k8s-node2\n" +
		"--- PASS: " + file + "/pins to node2 and node3 (X)\n" +
		"1 passed, 0 failed\n"
	if got := elapsed.ReplaceAllString(out, "(X)"); code != 0 || got != want {
		t.Fatalf("-run -v: exit %d, stdout\n%s\nwant exit 0 and\n%s", code, got, want)
	}
}

// Problems with the command line or the files exit non-zero, naming them.
func TestTestBadInput(t *testing.T) {
	dir := scenarioDir(t)
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "bad.yaml"), []byte("scenarios:\n- name: s\n  pod: pod.yaml\n"), 0o644)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string // regexp
		stdout string // regexp
	}{
		{"no match", []string{"-run", "nothing", dir}, 1, `^wasmsched test: no scenario matches -run nothing\n$`, `^$`},
		{"bad -run", []string{"-run", "(", dir}, 1, `^wasmsched test: -run: error parsing regexp: missing closing \): .*\n$`, `^$`},
		{"unused --policy", []string{"--policy", "nodepine=x.wasm", dir}, 1, `^wasmsched test: --policy nodepine: no scenario runs a policy of that name\n$`, `^$`},
		{"bad --policy", []string{"--policy", "nodepin", dir}, 1, `^wasmsched test: --policy "nodepin": want NAME=PATH .*\n$`, `^$`},
		{"no such path", []string{filepath.Join(dir, "nope")}, 1, `^wasmsched test: stat .*/nope: no such file or directory\n$`, `^$`},
		{"empty directory", []string{t.TempDir()}, 1, `^wasmsched test: .*: no scenario files \(\*\.yaml, \*\.yml\)\n$`, `^$`},
		{"file not valid", []string{bad}, 1,
			`^.*/bad.yaml: scenario "s": policies: none: list them in the scenario or at the top of the file\n` +
				`.*/bad.yaml: scenario "s": pod: open .*/pod.yaml: no such file or directory\n` +
				`.*/bad.yaml: scenario "s": nodes: missing: the nodes, a file or a list of files and inline Nodes\n` +
				`.*/bad.yaml: scenario "s": expect: missing: a scenario states what it expects\n$`,
			`^0 passed, 0 failed, 1 file not valid\n$`},
		{"unknown flag", []string{"-x", dir}, 2, `flag provided but not defined: -x\nUsage: wasmsched test`, `^$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(append([]string{"test"}, tc.args...)...)
			if code != tc.code || !regexp.MustCompile(tc.stderr).MatchString(errs) || !regexp.MustCompile(tc.stdout).MatchString(out) {
				t.Fatalf("exit %d, stderr %q, stdout %q; want exit %d, stderr matching %s, stdout matching %s", code, errs, out, tc.code, tc.stderr, tc.stdout)
			}
		})
	}
}
