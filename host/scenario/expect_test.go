package scenario

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/host/eval"
)

func ptr[T any](v T) *T { return &v }

// report is a cycle in which n1 and n2 passed (scores 80 and 20), n3 was
// rejected and the pod waits at Permit on n1.
func report() *eval.Report {
	return &eval.Report{
		Pod: "default/web",
		Nodes: []eval.NodeResult{
			{Name: "n1", Code: "Success", Reasons: []string{}, Score: ptr[int64](80)},
			{Name: "n2", Code: "Success", Reasons: []string{}, Score: ptr[int64](20)},
			{Name: "n3", Code: "Unschedulable", Reasons: []string{"zone: zone c is full", "second"}},
		},
		Permit:   eval.Verdict{Code: "Wait", Reasons: []string{"gang: 2 of 3 ready"}, Wait: "1m0s"},
		Selected: "n1",
		Failures: []string{"policy probe@0123456789ab: permit: deadline of 200ms exceeded"},
	}
}

// Only what is stated is checked, and every stated expectation that is met
// passes.
func TestCheckPasses(t *testing.T) {
	for name, exp := range map[string]Expect{
		"nothing stated": {},
		"everything stated": {
			Nodes: []NodeExpect{
				{Node: "n1", Code: "Success", Score: ptr[int64](80)},
				{Node: "n2", Score: ptr[int64](20)},
				{Node: "n3", Code: "Unschedulable", Reason: "c is full; sec", Unscored: true},
			},
			Order:     []string{"n1", "n2"},
			Selected:  ptr("n1"),
			Nominated: ptr(""),
			Permit:    &PermitExpect{Code: "Wait", Reason: "2 of 3", Wait: ptr(time.Minute)},
			Error:     ptr(""),
			Failure:   ptr("deadline of 200ms"),
		},
	} {
		if m := Check(exp, report()); len(m) != 0 {
			t.Errorf("%s: %+v", name, m)
		}
	}
	// A tie passes in either order.
	rep := report()
	*rep.Nodes[1].Score = 80
	if m := Check(Expect{Order: []string{"n2", "n1"}}, rep); len(m) != 0 {
		t.Errorf("tie: %+v", m)
	}
}

// Every expectation that is not met is one mismatch naming its field, with
// what was stated and what the cycle gave.
func TestCheckMismatches(t *testing.T) {
	exp := Expect{
		Nodes: []NodeExpect{
			{Node: "n1", Code: "Success", Score: ptr[int64](100)},
			{Node: "n2", Unscored: true},
			{Node: "n3", Reason: "zone d"},
			{Node: "n4", Code: "Success"},
		},
		Order:     []string{"n2", "n1", "n3"},
		Selected:  ptr(""),
		Nominated: ptr("n2"),
		Permit:    &PermitExpect{Code: "Wait", Wait: ptr(30 * time.Second)},
		Error:     ptr("score"),
		Failure:   ptr(""),
	}
	got := Check(exp, report())
	want := []Mismatch{
		{"expect.nodes.n1", "Success, score 100", "Success, score 80"},
		{"expect.nodes.n2", "not scored", "Success, score 20"},
		{"expect.nodes.n3", `reason containing "zone d"`, `Unschedulable, reason "zone: zone c is full"; "second", not scored`},
		{"expect.nodes.n4", "Success", "not in the report"},
		{"expect.order", "n2 >= n1 >= n3", "n1 (80), n2 (20), n3 (not scored)"},
		{"expect.selected", "none", "n1"},
		{"expect.nominated", "n2", "none"},
		{"expect.permit", "Wait, wait 30s", `Wait, reason "gang: 2 of 3 ready", wait 1m0s`},
		{"expect.error", `containing "score"`, "none: the cycle did not fail"},
		{"expect.failure", "none: no policy fails", `"policy probe@0123456789ab: permit: deadline of 200ms exceeded"`},
	}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("got\n%s\nwant\n%s", show(got), show(want))
	}

	rep := report()
	rep.Error, rep.Failures = "probe: policy failed (failurePolicy Fail): score", nil
	got = Check(Expect{Error: ptr(""), Failure: ptr("timeout")}, rep)
	want = []Mismatch{
		{"expect.error", "none: the cycle does not fail", `"probe: policy failed (failurePolicy Fail): score"`},
		{"expect.failure", `one containing "timeout"`, "none: no policy failed"},
	}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("got\n%s\nwant\n%s", show(got), show(want))
	}
}

// Policies that did not load meet only a failure stated for it.
func TestCheckLoadError(t *testing.T) {
	err := errors.New(`policy nodepin@0123456789ab: init: settings: json: unknown field "node"`)
	for _, tc := range []struct {
		name string
		exp  Expect
		want []Mismatch
	}{
		{"expected", Expect{Failure: ptr(`unknown field "node"`)}, nil},
		{"not expected", Expect{Selected: ptr("n1")}, []Mismatch{{"policies", "loaded", err.Error()}}},
		{"another failure", Expect{Failure: ptr("deadline")}, []Mismatch{{"policies", `a failure containing "deadline"`, err.Error()}}},
		{"expected, but more stated", Expect{Failure: ptr("settings"), Selected: ptr("n1")},
			[]Mismatch{{"expect", "the outcome of a cycle", "none: the policies did not load, as expect.failure states"}}},
	} {
		if got := CheckLoadError(tc.exp, err); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, show(got), show(tc.want))
		}
	}
}

func show(ms []Mismatch) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "  %s\n    want: %s\n    got:  %s\n", m.Field, m.Want, m.Got)
	}
	return b.String()
}
