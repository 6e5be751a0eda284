package scenario

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/eval"
)

// Runner runs scenarios. Each scenario loads its policies afresh, so that
// no state of a policy instance carries from one scenario to the next, and
// the order in which scenarios run does not change their outcome. A Runner
// is not safe for concurrent use.
type Runner struct {
	// Modules replaces the module of every policy with the name of a key by
	// the file at its value (`wasmsched test --policy NAME=PATH`): to run
	// the scenarios on another build (TinyGo's, a CI artefact) than the
	// one their files name.
	Modules map[string]string
	// Engine is the engine configuration of every policy; the zero value
	// has the scheduler's defaults.
	Engine engine.Config

	wasm map[string][]byte
}

// Result is the outcome of one scenario.
type Result struct {
	Scenario *Scenario
	// Report is what the cycle gave; nil when the policies did not load.
	Report *eval.Report
	// Group is what a pod-group scenario's cycle gave.
	Group *eval.GroupReport
	// LoadErr is why the policies did not load (a missing module file, a
	// module the engine refuses, settings the policy refuses).
	LoadErr error
	// Mismatches are the stated expectations not met; none when it passed.
	Mismatches []Mismatch
	Elapsed    time.Duration
}

// Passed reports whether every stated expectation was met.
func (r *Result) Passed() bool { return len(r.Mismatches) == 0 }

// Run loads the scenario's policies, evaluates its cycle and checks what
// it expects. Failures of the scenario are in the result; there is no
// other error.
func (r *Runner) Run(ctx context.Context, s *Scenario) *Result {
	start := time.Now()
	res := &Result{Scenario: s}
	defer func() { res.Elapsed = time.Since(start) }()
	ev, err := r.load(ctx, s)
	if err != nil {
		res.LoadErr = err
		res.Mismatches = CheckLoadError(s.Expect, err)
		return res
	}
	defer ev.Close(ctx)
	if s.Group != nil {
		return r.runGroup(ctx, ev, s, res)
	}
	rep, err := ev.Evaluate(ctx, s.Input)
	if err != nil {
		// ReadFile has checked the input eval refuses; keep it visible.
		res.Mismatches = []Mismatch{{Field: "scenario", Want: "a cycle to evaluate", Got: err.Error()}}
		return res
	}
	res.Report = rep
	res.Mismatches = Check(s.Expect, rep)
	return res
}

func (r *Runner) load(ctx context.Context, s *Scenario) (*eval.Evaluator, error) {
	specs := make([]eval.PolicySpec, len(s.Policies))
	for i, p := range s.Policies {
		path := p.Module
		if o, ok := r.Modules[p.Name]; ok {
			path = o
		}
		wasm, err := r.read(path)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", p.Name, err)
		}
		specs[i] = eval.PolicySpec{Name: p.Name, Wasm: wasm, Settings: p.Settings, Weight: p.Weight,
			FailurePolicy: p.FailurePolicy, Engine: r.Engine}
	}
	return eval.Load(ctx, specs)
}

// read returns a module's bytes, read once per Runner.
func (r *Runner) read(path string) ([]byte, error) {
	if b, ok := r.wasm[path]; ok {
		return b, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("module %s does not exist: build it first, or name another with --policy NAME=PATH", path)
		}
		return nil, err
	}
	if r.wasm == nil {
		r.wasm = map[string][]byte{}
	}
	r.wasm[path] = b
	return b, nil
}

// FindFiles expands the arguments of `wasmsched test` into scenario files:
// a file as it is, a directory into its *.yaml and *.yml files (not those
// of its subdirectories), sorted; no argument means the current directory.
// A directory without scenario files is an error, so that a mistyped path
// does not pass silently. A file named twice is listed once.
func FindFiles(args []string) ([]string, error) {
	if len(args) == 0 {
		args = []string{"."}
	}
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if c := filepath.Clean(p); !seen[c] {
			seen[c] = true
			out = append(out, p)
		}
	}
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			add(a)
			continue
		}
		entries, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		var files []string
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
				files = append(files, filepath.Join(a, e.Name()))
			}
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s: no scenario files (*.yaml, *.yml)", a)
		}
		sort.Strings(files)
		for _, f := range files {
			add(f)
		}
	}
	return out, nil
}

// Select returns the scenarios whose ID (FILE/NAME) the expression matches
// anywhere, as `go test -run` does; a nil expression selects all.
func Select(files []*File, run *regexp.Regexp) []*Scenario {
	var out []*Scenario
	for _, f := range files {
		for _, s := range f.Scenarios {
			if run == nil || run.MatchString(s.ID()) {
				out = append(out, s)
			}
		}
	}
	return out
}

// UnusedModules returns the names of Runner.Modules that no policy of the
// files has, sorted: a mistyped --policy NAME would otherwise run the
// scenarios on the modules their files name without a word.
func UnusedModules(files []*File, modules map[string]string) []string {
	used := map[string]bool{}
	for _, f := range files {
		for _, s := range f.Scenarios {
			for _, p := range s.Policies {
				used[p.Name] = true
			}
		}
	}
	var out []string
	for name := range modules {
		if !used[name] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// ParseModule reads a NAME=PATH override.
func ParseModule(s string) (name, path string, err error) {
	name, path, ok := strings.Cut(s, "=")
	if !ok || name == "" || path == "" {
		return "", "", fmt.Errorf("--policy %q: want NAME=PATH (a policy's name in the scenarios and a .wasm file)", s)
	}
	return name, path, nil
}
