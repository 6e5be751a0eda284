package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// Every `wasmsched <command>` the documentation shows is a command of this
// binary (a command that moved, such as `up`, fails here), and every
// `make <target>` a target of the Makefile. Commands whose output the
// documentation shows are run by the README tests; this catches the rest.
func TestDocumentedCommands(t *testing.T) {
	for _, c := range testwasm.DocCommands(t, "wasmsched") {
		if len(c.Args) == 0 || strings.HasSuffix(c.Args[0], ":") {
			continue // the bare name, or an error line quoted: "wasmsched eval: policy ..."
		}
		if code, _, errs := runCLI(c.Args[0], "-h"); code != 0 {
			t.Errorf("%s: wasmsched %s: %s", c.Where, strings.Join(c.Args, " "), strings.TrimSpace(errs))
		}
	}

	makefile, err := os.ReadFile(filepath.Join(testwasm.Root(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z0-9_.%/$()-]+):([^=]|$)`).FindAllStringSubmatch(string(makefile), -1) {
		targets[m[1]] = true
	}
	made := 0
	for _, c := range testwasm.DocCommands(t, "make") {
		for _, a := range c.Args {
			if strings.HasPrefix(a, "-") || strings.Contains(a, "=") {
				continue
			}
			if !targets[a] {
				t.Errorf("%s: make %s: the Makefile has no target %s", c.Where, strings.Join(c.Args, " "), a)
			}
			made++
		}
	}
	if made < 5 {
		t.Errorf("found %d make targets in the documentation, want at least 5: is DocCommands reading it?", made)
	}
}
