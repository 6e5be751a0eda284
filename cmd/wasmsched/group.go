package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/wasmsched/wasmsched/host/eval"
)

// printGroup prints a pod-group cycle: each placement tried, whether it
// held enough members and its score, then the placement chosen with the
// members' nodes, or the reasons none was.
func printGroup(w io.Writer, rep *eval.GroupReport) {
	fmt.Fprintf(w, "pod group %s\n", rep.PodGroup)
	for _, pl := range rep.Placements {
		verdict := "feasible"
		if !pl.Feasible {
			verdict = "not feasible: " + strings.Join(pl.Reasons, "; ")
		}
		score := ""
		if pl.Score != nil {
			score = fmt.Sprintf(", score %d", *pl.Score)
		}
		fmt.Fprintf(w, "placement %s [%s]: %s%s\n", orDash(pl.Name), strings.Join(pl.Nodes, ","), verdict, score)
	}
	if rep.Selected == "" && len(rep.Assignments) == 0 {
		fmt.Fprintf(w, "no placement: %s\n", strings.Join(rep.Reasons, "; "))
		return
	}
	var as []string
	for _, pod := range slices.Sorted(maps.Keys(rep.Assignments)) {
		as = append(as, pod+"="+rep.Assignments[pod])
	}
	fmt.Fprintf(w, "selected %s: %s\n", orDash(rep.Selected), strings.Join(as, " "))
	for _, f := range rep.Failures {
		fmt.Fprintf(w, "policy failure: %s\n", f)
	}
}
