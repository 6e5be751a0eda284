package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/wasmsched/wasmsched/host/scenario"
)

// errTestsFailed makes the command exit 1 after its output has said why.
var errTestsFailed = errors.New("scenarios failed")

const testUsage = `Usage: wasmsched test [-run REGEXP] [-v] [--policy NAME=P.wasm]... [DIR|FILE.yaml]...

Runs the scenario files given (a directory: its *.yaml and *.yml files; no
argument: the current directory) through the scheduler's composition of
policies, as wasmsched eval does, and checks what each scenario expects.
Prints one line per scenario, a diff under each failure, and a count; exits
1 if a scenario fails or a file is not valid. The format is in the policy
author's guide (guest/README.md, "Testing with scenarios").

`

func runTest(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, testUsage)
		fs.PrintDefaults()
	}
	runExpr := fs.String("run", "", "run only the scenarios whose FILE/NAME this regular expression matches")
	verbose := fs.Bool("v", false, "show every scenario's outcome, as a wasmsched eval table")
	var runner scenario.Runner
	var modErr error
	fs.Var(funcFlag{func(s string) error {
		name, path, err := scenario.ParseModule(s)
		if err != nil {
			return err
		}
		if runner.Modules == nil {
			runner.Modules = map[string]string{}
		}
		runner.Modules[name] = path
		return nil
	}, &modErr}, "policy", "NAME=P.wasm: run the policy named NAME in the scenarios from this module instead of the one they name (repeatable)")
	// Flags may come after the files too, as with go test.
	var paths []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return errUsage
		}
		if fs.NArg() == 0 {
			break
		}
		paths = append(paths, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if modErr != nil {
		return modErr
	}
	var run *regexp.Regexp
	if *runExpr != "" {
		var err error
		if run, err = regexp.Compile(*runExpr); err != nil {
			return fmt.Errorf("-run: %v", err)
		}
	}
	names, err := scenario.FindFiles(paths)
	if err != nil {
		return err
	}
	var files []*scenario.File
	invalid := 0
	for _, name := range names {
		f, err := scenario.ReadFile(name)
		if err != nil {
			fmt.Fprintln(stderr, err)
			invalid++
			continue
		}
		files = append(files, f)
	}
	if unused := scenario.UnusedModules(files, runner.Modules); len(unused) > 0 && invalid == 0 {
		return fmt.Errorf("--policy %s: no scenario runs a policy of that name", strings.Join(unused, ", "))
	}
	selected := scenario.Select(files, run)
	if len(selected) == 0 && invalid == 0 {
		if run != nil {
			return fmt.Errorf("no scenario matches -run %s", *runExpr)
		}
		return errors.New("no scenarios")
	}

	ctx := context.Background()
	passed, failed := 0, 0
	for _, s := range selected {
		if *verbose {
			fmt.Fprintf(stdout, "=== RUN   %s\n", s.ID())
		}
		res := runner.Run(ctx, s)
		if *verbose {
			showOutcome(stdout, res)
		}
		verdict := "PASS"
		if res.Passed() {
			passed++
		} else {
			verdict = "FAIL"
			failed++
		}
		fmt.Fprintf(stdout, "--- %s: %s (%.2fs)\n", verdict, s.ID(), res.Elapsed.Seconds())
		for _, m := range res.Mismatches {
			fmt.Fprintf(stdout, "    %s:\n        want: %s\n        got:  %s\n", m.Field, m.Want, m.Got)
		}
	}
	summary := fmt.Sprintf("%d passed, %d failed", passed, failed)
	if invalid > 0 {
		summary += fmt.Sprintf(", %d %s not valid", invalid, plural(invalid, "file", "files"))
	}
	fmt.Fprintln(stdout, summary)
	if failed > 0 || invalid > 0 {
		return errTestsFailed
	}
	return nil
}

// showOutcome prints what a scenario's cycle gave, indented under it: the
// eval table and the policy failures, or why its policies did not load.
func showOutcome(w io.Writer, res *scenario.Result) {
	var b bytes.Buffer
	switch {
	case res.LoadErr != nil:
		fmt.Fprintf(&b, "policies did not load: %v\n", res.LoadErr)
	case res.Group != nil:
		printGroup(&b, res.Group)
	case res.Report != nil:
		_ = printTable(&b, res.Report)
		for _, f := range res.Report.Failures {
			fmt.Fprintf(&b, "policy failure: %s\n", f)
		}
	}
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		if line != "" {
			fmt.Fprint(w, "    "+strings.TrimRight(line, " \n")+"\n")
		}
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
