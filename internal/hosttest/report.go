package hosttest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/wasmsched/wasmsched/host/eval"
)

// Verdict is what a node must get in a report: a code, the one reason that
// comes with a rejection, and the score of a node that passes. Build it
// with Passes, PassesAlone, Rejected or Unresolvable.
type Verdict struct {
	code   string
	reason string
	score  *int64
}

// Passes is a node that passes Filter and gets score.
func Passes(score int64) Verdict { return Verdict{code: "Success", score: &score} }

// PassesAlone is the only node that passes Filter: the scheduler does not
// score it, and neither does eval.
func PassesAlone() Verdict { return Verdict{code: "Success"} }

// Rejected is a node rejected (Unschedulable) for reason.
func Rejected(reason string) Verdict { return Verdict{code: "Unschedulable", reason: reason} }

// Unresolvable is a node rejected (UnschedulableAndUnresolvable) for
// reason.
func Unresolvable(reason string) Verdict {
	return Verdict{code: "UnschedulableAndUnresolvable", reason: reason}
}

func (v Verdict) reasons() []string {
	if v.reason == "" {
		return nil
	}
	return []string{v.reason}
}

func (v Verdict) String() string {
	s := v.code
	if v.reason != "" {
		s += fmt.Sprintf(" %q", v.reason)
	}
	if v.score != nil {
		s += fmt.Sprintf(" score %d", *v.score)
	}
	return s
}

func result(n eval.NodeResult) string {
	s := n.Code
	if len(n.Reasons) > 0 {
		s += fmt.Sprintf(" %q", n.Reasons)
	}
	if n.Score != nil {
		s += fmt.Sprintf(" score %d", *n.Score)
	}
	return s
}

// CheckReport reports an error on t for every node of rep whose verdict
// is not the one want gives it, for every node of want that rep lacks, and
// unless rep selects selected ("" for none).
func CheckReport(t testing.TB, rep *eval.Report, selected string, want map[string]Verdict) {
	t.Helper()
	seen := map[string]bool{}
	for _, n := range rep.Nodes {
		seen[n.Name] = true
		w, ok := want[n.Name]
		switch {
		case !ok:
			t.Errorf("node %s: %s, a node the test does not expect", n.Name, result(n))
		case n.Code != w.code || !slices.Equal(n.Reasons, w.reasons()) ||
			(n.Score == nil) != (w.score == nil) || (n.Score != nil && *n.Score != *w.score):
			t.Errorf("node %s: %s, want %s", n.Name, result(n), w)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("node %s: not in the report", name)
		}
	}
	if rep.Selected != selected {
		t.Errorf("selected %q, want %q", rep.Selected, selected)
	}
}
