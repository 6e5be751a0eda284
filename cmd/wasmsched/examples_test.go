package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// The scenarios of every example pass on the module built from it, as
// `make test-scenarios` runs them on `make examples`' builds.
func TestExampleScenarios(t *testing.T) {
	root := testwasm.Root(t)
	dirs, err := filepath.Glob(filepath.Join(root, "examples", "*", "scenarios"))
	if err != nil {
		t.Fatal(err)
	}
	examples, _ := filepath.Glob(filepath.Join(root, "examples", "*", "main.go"))
	if len(dirs) == 0 || len(dirs) != len(examples) {
		t.Fatalf("%d examples, %d with scenarios: every example has examples/<name>/scenarios", len(examples), len(dirs))
	}
	for _, dir := range dirs {
		name := filepath.Base(filepath.Dir(dir))
		t.Run(name, func(t *testing.T) {
			// Its own module, and those of other examples its scenarios
			// run beside it (topology's run with gpu's).
			args := []string{"test"}
			for _, p := range referencedExamples(t, dir, name) {
				args = append(args, "--policy", p+"="+testwasm.Path(t, "examples/"+p))
			}
			code, out, errs := runCLI(append(args, dir)...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %s\n%s", code, errs, out)
			}
			if !strings.HasSuffix(out, " 0 failed\n") || strings.HasPrefix(out, "0 passed") {
				t.Fatalf("output:\n%s", out)
			}
		})
	}
}

// exampleModule matches a scenario file's reference to an example's
// module as `make examples` builds it.
var exampleModule = regexp.MustCompile(`bin/policies/([a-z0-9-]+)\.wasm`)

// referencedExamples is name and the other examples whose modules the
// scenario files in dir name.
func referencedExamples(t *testing.T, dir, name string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{name}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range exampleModule.FindAllStringSubmatch(string(b), -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	return out
}
