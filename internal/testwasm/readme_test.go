package testwasm

import (
	"fmt"
	"testing"
)

// Command lines are read from shell blocks and inline code only, from the
// first word of each command, up to a comment, pipe or redirection.
func TestCommandsInMarkdown(t *testing.T) {
	md := "wasmsched is a scheduler; run `bin/wasmsched eval --pod p.yaml` or `make build examples`.\n" +
		"```sh\n" +
		"make examples   # bin/policies\n" +
		"go build -o /tmp/wasmsched ./cmd/wasmsched\n" +
		"/tmp/wasmsched test \\\n" +
		"  -v scenarios/ | tee out; bin/wasmsched pack p.wasm > cm.yaml\n" +
		"```\n" +
		"```\n" +
		"wasmsched eval: policy p: output, not a command\n" +
		"```\n"
	var got []string
	for _, c := range codeLines(md) {
		for _, program := range []string{"wasmsched", "make"} {
			for _, args := range commandsOf(c.text, program) {
				got = append(got, fmt.Sprintf("%d %s %q", c.line, program, args))
			}
		}
	}
	want := []string{
		`1 wasmsched ["eval" "--pod" "p.yaml"]`,
		`1 make ["build" "examples"]`,
		`3 make ["examples"]`,
		`5 wasmsched ["test" "-v" "scenarios/"]`,
		`5 wasmsched ["pack" "p.wasm"]`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}
