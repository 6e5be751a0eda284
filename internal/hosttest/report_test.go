package hosttest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/host/eval"
)

// recorder records what CheckReport reports instead of failing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func score(v int64) *int64 { return &v }

func TestCheckReport(t *testing.T) {
	rep := &eval.Report{
		Nodes: []eval.NodeResult{
			{Name: "a", Code: "Success", Reasons: []string{}, Score: score(100)},
			{Name: "b", Code: "Unschedulable", Reasons: []string{"p: full"}},
			{Name: "c", Code: "UnschedulableAndUnresolvable", Reasons: []string{"p: no"}},
		},
		Selected: "a",
	}
	want := map[string]Verdict{"a": Passes(100), "b": Rejected("p: full"), "c": Unresolvable("p: no")}
	r := &recorder{}
	CheckReport(r, rep, "a", want)
	if len(r.errs) != 0 {
		t.Fatalf("a matching report: %q", r.errs)
	}
	for _, tc := range []struct {
		name     string
		node     string
		verdict  Verdict
		selected string
		report   string
	}{
		{"another score", "a", Passes(50), "a", `node a: Success score 100, want Success score 50`},
		{"unscored", "a", PassesAlone(), "a", `node a: Success score 100, want Success`},
		{"another code", "b", Unresolvable("p: full"), "a", `node b: Unschedulable ["p: full"], want UnschedulableAndUnresolvable "p: full"`},
		{"another reason", "c", Unresolvable("p: nope"), "a", `want UnschedulableAndUnresolvable "p: nope"`},
		{"a node the report lacks", "d", Passes(0), "a", `node d: not in the report`},
		{"another selection", "a", Passes(100), "b", `selected "a", want "b"`},
	} {
		w := map[string]Verdict{}
		for k, v := range want {
			w[k] = v
		}
		w[tc.node] = tc.verdict
		r := &recorder{}
		CheckReport(r, rep, tc.selected, w)
		if len(r.errs) != 1 || !strings.Contains(r.errs[0], tc.report) {
			t.Errorf("%s: reported %q, want one error containing %q", tc.name, r.errs, tc.report)
		}
	}
	delete(want, "c")
	r = &recorder{}
	CheckReport(r, rep, "a", want)
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "node c: UnschedulableAndUnresolvable") {
		t.Errorf("a node the test does not expect: reported %q", r.errs)
	}
}
