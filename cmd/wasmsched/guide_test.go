package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// The author's guide shows `wasmsched test` as it is: each shell block of
// guest/README.md that runs `bin/wasmsched test` is run, in a directory
// laid out as after `make build-cli examples`, and prints the text block
// that follows it (times aside); the scenario file it shows is nodepin's.
func TestGuideScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/wasmsched")
	}
	root := testwasm.Root(t)
	guide, err := os.ReadFile(filepath.Join(root, "guest", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const shown = "examples/nodepin/scenarios/nodepin.yaml"
	m := regexp.MustCompile("(?s)`" + regexp.QuoteMeta(shown) + "`:\n\n```yaml\n(.*?)```").FindSubmatch(guide)
	if m == nil {
		t.Fatalf("guest/README.md shows no %s", shown)
	}
	if file, err := os.ReadFile(filepath.Join(root, shown)); err != nil || string(file) != string(m[1]) {
		t.Errorf("guest/README.md shows\n%s\nwhich is not %s (%v)", m[1], shown, err)
	}

	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "bin", "policies"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"bin/wasmsched":             testwasm.CLI(t),
		"bin/policies/nodepin.wasm": testwasm.Path(t, "examples/nodepin"),
		"examples":                  filepath.Join(root, "examples"),
	} {
		if err := os.Symlink(target, filepath.Join(work, link)); err != nil {
			t.Fatal(err)
		}
	}
	tmp := t.TempDir()
	normalize := func(s string) string {
		return elapsed.ReplaceAllString(strings.ReplaceAll(s, tmp+"/", "/tmp/"), "(X)")
	}
	ran := testwasm.RunShownBlocks(t, "guest/README.md", string(guide), work, tmp, "bin/wasmsched test", normalize)
	if ran < 2 {
		t.Errorf("ran %d blocks with bin/wasmsched test, want 2", ran)
	}
}

// The guide's list of eval flags names every flag that gives a run its
// policies and inputs (the pod and nodes flags are in its example).
func TestGuideEvalFlags(t *testing.T) {
	guide, err := os.ReadFile(filepath.Join(testwasm.Root(t), "guest", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, list, ok := strings.Cut(string(guide), "Useful flags:\n")
	list, _, _ = strings.Cut(list, "\n\n\n")
	list, _, _ = strings.Cut(list, "\nA policy failure")
	if !ok {
		t.Fatal(`guest/README.md has no "Useful flags:" list`)
	}
	for _, flag := range []string{"--policy", "--config", "--weight", "--failure-policy", "--pods", "--objects", "--pod-group", "-o json"} {
		if !strings.Contains(list, "`"+flag) {
			t.Errorf("the guide's list of eval flags lacks %s:\n%s", flag, list)
		}
	}
}
