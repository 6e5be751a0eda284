package main

import (
	"path/filepath"
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
			code, out, errs := runCLI("test", "--policy", name+"="+testwasm.Path(t, "examples/"+name), dir)
			if code != 0 {
				t.Fatalf("exit %d, stderr %s\n%s", code, errs, out)
			}
			if !strings.HasSuffix(out, " 0 failed\n") || strings.HasPrefix(out, "0 passed") {
				t.Fatalf("output:\n%s", out)
			}
		})
	}
}
