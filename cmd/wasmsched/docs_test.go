package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/kubemod"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// Every `wasmsched <command>` the documentation shows is a command of this
// binary (a command that moved, such as `up`, fails here) whose flags, as
// shown, parse (a flag that was renamed fails here), and every
// `make <target>` a target of the Makefile. Commands whose output the
// documentation shows are run by the README tests; this catches the rest.
func TestDocumentedCommands(t *testing.T) {
	for _, c := range testwasm.DocCommands(t, "wasmsched") {
		if len(c.Args) == 0 || strings.HasSuffix(c.Args[0], ":") {
			continue // the bare name, or an error line quoted: "wasmsched eval: policy ..."
		}
		// The command line with -h appended: its flags must parse (an
		// elision, "...", is left out).
		args := slices.DeleteFunc(slices.Clone(c.Args), func(a string) bool { return a == "..." || a == "…" })
		if code, _, errs := runCLI(append(args, "-h")...); code != 0 {
			t.Errorf("%s: wasmsched %s: %s", c.Where, strings.Join(c.Args, " "), strings.TrimSpace(errs))
		}
	}

	targets := makeTargets(t, filepath.Join(testwasm.Root(t), "Makefile"))
	// The guide's "Start a project" runs make in a project wasmsched new
	// wrote: its targets are the skeleton's.
	project := makeTargets(t, filepath.Join(testwasm.Root(t), "cmd", "wasmsched", "skeleton", "Makefile.tmpl"))
	first, last := guideStartLines(t)
	all, err := kubemod.Minors(testwasm.Root(t))
	if err != nil {
		t.Fatal(err)
	}
	minors := map[string]bool{}
	for _, m := range all {
		minors[m.Minor] = true
	}
	made := 0
	for _, c := range testwasm.DocCommands(t, "make") {
		want := targets
		if file, line, ok := strings.Cut(c.Where, ":"); ok && file == filepath.Join("guest", "README.md") {
			if n, err := strconv.Atoi(line); err == nil && n >= first && n <= last {
				want = project
			}
		}
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "K8S="); ok && !minors[v] {
				t.Errorf("%s: make %s: the tree builds for no Kubernetes %s", c.Where, strings.Join(c.Args, " "), v)
			}
			if strings.HasPrefix(a, "-") || strings.Contains(a, "=") {
				continue
			}
			if !want[a] {
				t.Errorf("%s: make %s: the Makefile has no target %s", c.Where, strings.Join(c.Args, " "), a)
			}
			made++
		}
	}
	if made < 5 {
		t.Errorf("found %d make targets in the documentation, want at least 5: is DocCommands reading it?", made)
	}
}

// makeTargets returns the targets a Makefile defines.
func makeTargets(t *testing.T, path string) map[string]bool {
	t.Helper()
	makefile, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z0-9_.%/$()-]+):([^=]|$)`).FindAllStringSubmatch(string(makefile), -1) {
		targets[m[1]] = true
	}
	return targets
}

// guideStartLines returns the first and last line of guest/README.md's
// "Start a project" section.
func guideStartLines(t *testing.T) (first, last int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testwasm.Root(t), "guest", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		switch {
		case l == "## Start a project":
			first = i + 1
		case first > 0 && last == 0 && strings.HasPrefix(l, "## "):
			last = i
		}
	}
	if first == 0 || last == 0 {
		t.Fatal(`guest/README.md has no "## Start a project" section followed by another`)
	}
	return first, last
}
