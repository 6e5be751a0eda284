package scenario

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmsched/wasmsched/host/eval"
)

// Expect is what a scenario states about the outcome; what it leaves out
// is not checked. For the optional texts (Selected, Nominated, Error,
// Failure) nil means not stated and "" means "none".
type Expect struct {
	// Nodes are the verdicts stated, in the order of the scenario's nodes.
	Nodes []NodeExpect
	// Order lists scored nodes, the highest score first; a tie passes in
	// either order.
	Order []string
	// Selected is the node the cycle selects, "" for none.
	Selected *string
	// Nominated is the node a PostFilter nominates, "" for none.
	Nominated *string
	// Permit is the verdict of the binding points on the selected node.
	Permit *PermitExpect
	// Error is a substring of the failed cycle's error, "" for a cycle that
	// does not fail.
	Error *string
	// Failure is a substring of one of the policy failures (or of the
	// error that kept the policies from loading), "" for no failure.
	Failure *string
	// Placement is what a pod-group scenario expects of the group's
	// placement (group.go).
	Placement *PlacementExpect
}

// NodeExpect is what a scenario states about one node.
type NodeExpect struct {
	Node string
	// Code is the verdict's code ("" not stated): Success, Unschedulable,
	// UnschedulableAndUnresolvable, Error, ...
	Code string
	// Reason is a substring of the node's reasons, joined by "; " ("" not
	// stated).
	Reason string
	// Score is the node's combined score; Unscored states that it has none
	// (it was rejected, or was the only node to pass Filter).
	Score    *int64
	Unscored bool
}

// PermitExpect is what a scenario states about Permit's verdict (the first
// of Reserve, Permit and PreBind that stopped the pod, as eval reports it).
type PermitExpect struct {
	Code   string
	Reason string
	// Wait is how long the pod waits, for code Wait; nil not stated.
	Wait *time.Duration
}

// codes are the verdict codes a report can hold.
var codes = []string{"Success", "Unschedulable", "UnschedulableAndUnresolvable", "Error", "Wait", "Skip", "Pending"}

// optional is a text that may be stated as null or empty ("none").
type optional struct {
	set   bool
	value string
}

func (o *optional) UnmarshalJSON(b []byte) error {
	o.set = true
	if string(b) == "null" {
		return nil
	}
	return json.Unmarshal(b, &o.value)
}

func (o optional) ptr() *string {
	if !o.set {
		return nil
	}
	return &o.value
}

// score is a stated score: an integer, or null/empty for "not scored".
type score struct {
	set      bool
	unscored bool
	value    int64
}

func (s *score) UnmarshalJSON(b []byte) error {
	s.set = true
	if string(b) == "null" || string(b) == `""` {
		s.unscored = true
		return nil
	}
	return json.Unmarshal(b, &s.value)
}

type rawExpect struct {
	Nodes     map[string]json.RawMessage `json:"nodes"`
	Order     []string                   `json:"order"`
	Selected  optional                   `json:"selected"`
	Nominated optional                   `json:"nominated"`
	Permit    json.RawMessage            `json:"permit"`
	Error     optional                   `json:"error"`
	Failure   optional                   `json:"failure"`
	Placement json.RawMessage            `json:"placement"`
}

type rawNodeExpect struct {
	Code   string `json:"code"`
	Reason string `json:"reason"`
	Score  score  `json:"score"`
}

type rawPermit struct {
	Code   string `json:"code"`
	Reason string `json:"reason"`
	Wait   string `json:"wait"`
}

// expect reads a scenario's expectations; node names are checked against
// nodes when checkNames is set.
func (p *parser) expect(raw json.RawMessage, nodes []*v1.Node, checkNames bool) (Expect, bool) {
	before := len(p.errs)
	var re rawExpect
	if !p.decode("expect", raw, &re) {
		return Expect{}, false
	}
	known, list := nodeNames(nodes)
	unknown := func(field, name string) bool {
		if known[name] || !checkNames {
			return false
		}
		p.fail(field, "no node %s among the scenario's nodes (%s)", name, strings.Join(list, ", "))
		return true
	}
	e := Expect{Order: re.Order, Selected: re.Selected.ptr(), Nominated: re.Nominated.ptr(), Error: re.Error.ptr(), Failure: re.Failure.ptr()}
	for name := range re.Nodes {
		unknown("expect.nodes."+name, name)
	}
	// In the order of the nodes; by name where they are not known.
	var order []string
	for _, n := range nodes {
		order = append(order, n.Name)
	}
	if !checkNames {
		order = slices.Sorted(maps.Keys(re.Nodes))
	}
	for _, name := range order {
		raw, ok := re.Nodes[name]
		if !ok {
			continue
		}
		f := "expect.nodes." + name
		ne := NodeExpect{Node: name}
		var rn rawNodeExpect
		if len(raw) > 0 && raw[0] == '"' {
			// The short form: only the code.
			_ = json.Unmarshal(raw, &rn.Code)
		} else if !p.decode(f, raw, &rn) {
			continue
		}
		ne.Code, ne.Reason = rn.Code, rn.Reason
		if ne.Code != "" && !slices.Contains(codes, ne.Code) {
			p.fail(f+".code", "%q is not a code (%s)", ne.Code, strings.Join(codes, ", "))
		}
		if rn.Score.set {
			if rn.Score.unscored {
				ne.Unscored = true
			} else {
				v := rn.Score.value
				ne.Score = &v
			}
		}
		if ne.Code == "" && ne.Reason == "" && !rn.Score.set {
			p.fail(f, "states nothing: give a code, a reason or a score")
		}
		e.Nodes = append(e.Nodes, ne)
	}
	seen := map[string]bool{}
	for i, name := range re.Order {
		f := fmt.Sprintf("expect.order[%d]", i)
		if !unknown(f, name) && seen[name] {
			p.fail(f, "%s is listed twice", name)
		}
		seen[name] = true
	}
	if e.Selected != nil && *e.Selected != "" {
		unknown("expect.selected", *e.Selected)
	}
	if e.Nominated != nil && *e.Nominated != "" {
		unknown("expect.nominated", *e.Nominated)
	}
	if !isNull(re.Permit) {
		var rp rawPermit
		if p.decode("expect.permit", re.Permit, &rp) {
			pe := &PermitExpect{Code: rp.Code, Reason: rp.Reason}
			if pe.Code != "" && !slices.Contains(codes, pe.Code) {
				p.fail("expect.permit.code", "%q is not a code (%s)", pe.Code, strings.Join(codes, ", "))
			}
			if rp.Wait != "" {
				d, err := time.ParseDuration(rp.Wait)
				if err != nil {
					p.fail("expect.permit.wait", "%q is not a duration (such as 30s or 1m)", rp.Wait)
				}
				pe.Wait = &d
			}
			e.Permit = pe
		}
	}
	if !isNull(re.Placement) {
		e.Placement = p.placementExpect(re.Placement)
	}
	return e, len(p.errs) == before
}

// Mismatch is one stated expectation the outcome does not meet.
type Mismatch struct {
	// Field is where the scenario states it: expect.nodes.a-1,
	// expect.selected, ...
	Field string
	// Want is what the scenario states, Got what the cycle gave.
	Want, Got string
}

// Check compares a report with what a scenario expects and returns every
// difference, in the order of Expect's fields (nodes in the order of the
// report).
func Check(exp Expect, rep *eval.Report) []Mismatch {
	var out []Mismatch
	add := func(field, want, got string) { out = append(out, Mismatch{field, want, got}) }
	byName := map[string]*eval.NodeResult{}
	for i := range rep.Nodes {
		byName[rep.Nodes[i].Name] = &rep.Nodes[i]
	}
	for _, ne := range exp.Nodes {
		n := byName[ne.Node]
		if n == nil {
			add("expect.nodes."+ne.Node, describeNode(ne), "not in the report")
			continue
		}
		joined := strings.Join(n.Reasons, "; ")
		if (ne.Code != "" && n.Code != ne.Code) ||
			(ne.Reason != "" && !strings.Contains(joined, ne.Reason)) ||
			(ne.Unscored && n.Score != nil) ||
			(ne.Score != nil && (n.Score == nil || *n.Score != *ne.Score)) {
			add("expect.nodes."+ne.Node, describeNode(ne), describeResult(*n))
		}
	}
	if len(exp.Order) > 0 {
		ok := true
		for i, name := range exp.Order {
			n := byName[name]
			if n == nil || n.Score == nil || (i > 0 && *byName[exp.Order[i-1]].Score < *n.Score) {
				ok = false
				break
			}
		}
		if !ok {
			add("expect.order", strings.Join(exp.Order, " >= "), ranking(rep, exp.Order))
		}
	}
	if exp.Selected != nil && rep.Selected != *exp.Selected {
		add("expect.selected", orNone(*exp.Selected), orNone(rep.Selected))
	}
	if exp.Nominated != nil && rep.Nominated != *exp.Nominated {
		add("expect.nominated", orNone(*exp.Nominated), orNone(rep.Nominated))
	}
	if pe := exp.Permit; pe != nil {
		joined := strings.Join(rep.Permit.Reasons, "; ")
		got, _ := time.ParseDuration(rep.Permit.Wait)
		if (pe.Code != "" && rep.Permit.Code != pe.Code) ||
			(pe.Reason != "" && !strings.Contains(joined, pe.Reason)) ||
			(pe.Wait != nil && (rep.Permit.Wait == "" || got != *pe.Wait)) {
			add("expect.permit", describePermitExpect(*pe), describeVerdict(rep.Permit))
		}
	}
	if exp.Error != nil {
		switch {
		case *exp.Error == "" && rep.Error != "":
			add("expect.error", "none: the cycle does not fail", strconv.Quote(rep.Error))
		case *exp.Error != "" && !strings.Contains(rep.Error, *exp.Error):
			add("expect.error", "containing "+strconv.Quote(*exp.Error), orNoneQuoted(rep.Error, "the cycle did not fail"))
		}
	}
	if exp.Failure != nil {
		checkFailure(*exp.Failure, rep.Failures, add)
	}
	return out
}

// checkFailure compares the policy failures with the one expected.
func checkFailure(want string, failures []string, add func(field, want, got string)) {
	if want == "" {
		if len(failures) > 0 {
			add("expect.failure", "none: no policy fails", quoteAll(failures))
		}
		return
	}
	for _, f := range failures {
		if strings.Contains(f, want) {
			return
		}
	}
	add("expect.failure", "one containing "+strconv.Quote(want), orNoneQuoted(quoteAll(failures), "no policy failed"))
}

// CheckLoadError compares the error that kept a scenario's policies from
// loading with what it expects: only a stated failure can be met by it;
// anything else stated cannot be checked and is reported as such.
func CheckLoadError(exp Expect, err error) []Mismatch {
	var out []Mismatch
	add := func(field, want, got string) { out = append(out, Mismatch{field, want, got}) }
	if exp.Failure != nil && *exp.Failure != "" && strings.Contains(err.Error(), *exp.Failure) {
		if exp.Nodes == nil && exp.Order == nil && exp.Selected == nil && exp.Nominated == nil && exp.Permit == nil && exp.Error == nil {
			return nil
		}
		add("expect", "the outcome of a cycle", "none: the policies did not load, as expect.failure states")
		return out
	}
	want := "loaded"
	if exp.Failure != nil && *exp.Failure != "" {
		want = "a failure containing " + strconv.Quote(*exp.Failure)
	}
	add("policies", want, err.Error())
	return out
}

func describeNode(ne NodeExpect) string {
	var parts []string
	if ne.Code != "" {
		parts = append(parts, ne.Code)
	}
	if ne.Reason != "" {
		parts = append(parts, "reason containing "+strconv.Quote(ne.Reason))
	}
	switch {
	case ne.Score != nil:
		parts = append(parts, "score "+strconv.FormatInt(*ne.Score, 10))
	case ne.Unscored:
		parts = append(parts, "not scored")
	}
	return strings.Join(parts, ", ")
}

func describeResult(n eval.NodeResult) string {
	parts := []string{n.Code}
	if len(n.Reasons) > 0 {
		parts = append(parts, "reason "+quoteAll(n.Reasons))
	}
	if n.Score != nil {
		parts = append(parts, "score "+strconv.FormatInt(*n.Score, 10))
	} else {
		parts = append(parts, "not scored")
	}
	return strings.Join(parts, ", ")
}

func describePermitExpect(pe PermitExpect) string {
	var parts []string
	if pe.Code != "" {
		parts = append(parts, pe.Code)
	}
	if pe.Reason != "" {
		parts = append(parts, "reason containing "+strconv.Quote(pe.Reason))
	}
	if pe.Wait != nil {
		parts = append(parts, "wait "+pe.Wait.String())
	}
	return strings.Join(parts, ", ")
}

func describeVerdict(v eval.Verdict) string {
	parts := []string{v.Code}
	if len(v.Reasons) > 0 {
		parts = append(parts, "reason "+quoteAll(v.Reasons))
	}
	if v.Wait != "" {
		parts = append(parts, "wait "+v.Wait)
	}
	return strings.Join(parts, ", ")
}

// ranking shows the scores of the listed nodes, highest first.
func ranking(rep *eval.Report, names []string) string {
	type scored struct {
		name  string
		score *int64
	}
	var list []scored
	for _, r := range rep.Nodes {
		if slices.Contains(names, r.Name) {
			list = append(list, scored{r.Name, r.Score})
		}
	}
	slices.SortStableFunc(list, func(a, b scored) int {
		switch {
		case a.score == nil && b.score == nil:
			return 0
		case a.score == nil:
			return 1
		case b.score == nil:
			return -1
		}
		return int(*b.score - *a.score)
	})
	var parts []string
	for _, s := range list {
		v := "not scored"
		if s.score != nil {
			v = strconv.FormatInt(*s.score, 10)
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", s.name, v))
	}
	return strings.Join(parts, ", ")
}

func quoteAll(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, "; ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func orNoneQuoted(s, none string) string {
	if s == "" {
		return "none: " + none
	}
	if strings.HasPrefix(s, `"`) {
		return s
	}
	return strconv.Quote(s)
}
