package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmsched/wasmsched/host/eval"
)

// A scenario may place a pod group instead of a pod: podGroup (a PodGroup
// file or inline object) and members (its pods, files or inline Pods, in
// the order the scheduler tries them), with expect.placement:
//
//	expect:
//	  placement:
//	    selected: example.com/rack=r1     # "" for none
//	    assignments: {train-0: r1-a}      # member -> node
//	    reason: needs 4 pods              # a substring of the reasons
//	    nominated: {train-0: r1-a}        # PodGroupPostFilter's nominations

// PlacementExpect is what a pod-group scenario states of the placement.
type PlacementExpect struct {
	// Selected is the placement chosen, "" for none; nil not stated.
	Selected *string
	// Assignments are members' nodes in the chosen placement.
	Assignments map[string]string
	// Reason is a substring of the group's reasons (why no placement).
	Reason string
	// Nominated are the members the policies' PodGroupPostFilter
	// nominated to nodes, by pod name ("" for none).
	Nominated map[string]string
}

type rawPlacementExpect struct {
	Selected    optional          `json:"selected"`
	Assignments map[string]string `json:"assignments"`
	Reason      string            `json:"reason"`
	Nominated   map[string]string `json:"nominated"`
}

func (p *parser) placementExpect(raw json.RawMessage) *PlacementExpect {
	var rp rawPlacementExpect
	if !p.decode("expect.placement", raw, &rp) {
		return nil
	}
	pe := &PlacementExpect{Selected: rp.Selected.ptr(), Assignments: rp.Assignments, Reason: rp.Reason, Nominated: rp.Nominated}
	if pe.Selected == nil && len(pe.Assignments) == 0 && pe.Reason == "" && len(pe.Nominated) == 0 {
		p.fail("expect.placement", "states nothing: give selected, assignments, a reason or nominated")
	}
	return pe
}

// group reads a scenario's pod group and members.
func (p *parser) group(rawGroup, rawMembers json.RawMessage) *eval.GroupInput {
	g := &eval.GroupInput{}
	if isNull(rawGroup) {
		p.fail("podGroup", "missing: the PodGroup the members belong to, a file or an inline object")
	} else {
		p.objects("podGroup", rawGroup, "PodGroup", false, func(path string, data []byte) error {
			objs, err := eval.ParseObjects(path, data)
			if err != nil {
				return err
			}
			if len(objs) != 1 {
				return fmt.Errorf("%d objects where one PodGroup was expected", len(objs))
			}
			g.PodGroup, err = eval.PodGroupFromObject(objs[0])
			return err
		})
	}
	if isNull(rawMembers) {
		p.fail("members", "missing: the group's pods, files or inline Pods")
		return g
	}
	g.Members = p.pods("members", rawMembers, false)
	seen := map[string]bool{}
	for _, m := range g.Members {
		if seen[m.Name] {
			p.fail("members", "pod %s is listed twice", m.Name)
		}
		seen[m.Name] = true
		if m.UID == "" {
			// Placement scores name members by UID.
			m.UID = types.UID("uid-" + m.Namespace + "-" + m.Name)
		}
		if g.PodGroup != nil && m.Namespace != g.PodGroup.GetNamespace() {
			p.fail("members", "pod %s is in namespace %s, the PodGroup in %s", m.Name, m.Namespace, g.PodGroup.GetNamespace())
		}
	}
	return g
}

// runGroup evaluates a pod-group scenario.
func (r *Runner) runGroup(ctx context.Context, ev *eval.Evaluator, s *Scenario, res *Result) *Result {
	rep, err := ev.EvaluateGroup(ctx, *s.Group)
	if err != nil {
		res.Mismatches = []Mismatch{{Field: "scenario", Want: "a pod group to evaluate", Got: err.Error()}}
		return res
	}
	res.Group = rep
	res.Mismatches = CheckGroup(s.Expect, rep)
	return res
}

// CheckGroup compares a pod-group cycle's report with what a scenario
// expects: expect.placement and expect.failure (the per-pod expectations
// do not apply to a group).
func CheckGroup(exp Expect, rep *eval.GroupReport) []Mismatch {
	var out []Mismatch
	add := func(field, want, got string) { out = append(out, Mismatch{field, want, got}) }
	if exp.Nodes != nil || exp.Order != nil || exp.Selected != nil || exp.Nominated != nil || exp.Permit != nil || exp.Error != nil {
		add("expect", "placement or failure", "a pod group scenario states only expect.placement and expect.failure")
	}
	if pe := exp.Placement; pe != nil {
		if pe.Selected != nil && rep.Selected != *pe.Selected {
			add("expect.placement.selected", orNone(*pe.Selected), orNone(rep.Selected))
		}
		for _, pod := range slices.Sorted(maps.Keys(pe.Assignments)) {
			if got := rep.Assignments[pod]; got != pe.Assignments[pod] {
				add("expect.placement.assignments."+pod, pe.Assignments[pod], orNone(got))
			}
		}
		var nominated map[string]string
		if rep.PostFilter != nil {
			nominated = rep.PostFilter.Nominated
		}
		for _, pod := range slices.Sorted(maps.Keys(pe.Nominated)) {
			if got := nominated[pod]; got != pe.Nominated[pod] {
				add("expect.placement.nominated."+pod, orNone(pe.Nominated[pod]), orNone(got))
			}
		}
		if pe.Reason != "" && !strings.Contains(strings.Join(rep.Reasons, "; "), pe.Reason) {
			add("expect.placement.reason", "containing "+strconv.Quote(pe.Reason), orNoneQuoted(strings.Join(rep.Reasons, "; "), "no reason"))
		}
	}
	if exp.Failure != nil {
		checkFailure(*exp.Failure, rep.Failures, add)
	}
	return out
}
