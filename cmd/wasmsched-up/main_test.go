package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// A bad command line is refused before anything starts, with one line or
// the usage.
func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--exit"}, 1, "wasmsched-up: --exit needs --demo\n"},
		{[]string{"--demo", "extra"}, 1, "wasmsched-up: unexpected argument \"extra\"\n"},
		{[]string{"--no-such-flag"}, 2, "Usage: wasmsched-up"},
		{[]string{"-h"}, 0, "Usage: wasmsched-up"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) || out.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d and stderr containing %q", tc.args, code, out.String(), errb.String(), tc.code, tc.want)
		}
	}
}

// Every `wasmsched-up ...` the documentation shows (make run's, the
// README's) is a command line this binary accepts.
func TestDocumentedCommandLines(t *testing.T) {
	shown := testwasm.DocCommands(t, "wasmsched-up")
	for _, c := range shown {
		var errb bytes.Buffer
		if _, err := parseArgs(c.Args, &errb); err != nil {
			t.Errorf("%s: wasmsched-up %s: %v %s", c.Where, strings.Join(c.Args, " "), err, errb.String())
		}
	}
	if len(shown) < 2 {
		t.Errorf("the documentation shows %d wasmsched-up command lines, want at least 2 (README.md's)", len(shown))
	}
}
