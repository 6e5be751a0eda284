package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/wasmsched/wasmsched/host/eval"
)

// runEvalGroup is wasmsched eval --pod-group: the group's pod-group cycle
// (eval.EvaluateGroup), printed as printGroup does or as JSON. A policy
// failure makes the run fail, as for a pod.
func runEvalGroup(specs []eval.PolicySpec, groupPath, membersPath, nodesPath, podsPath, objectsPath, output string, stdout, stderr io.Writer) error {
	var in eval.GroupInput
	objs, err := eval.ReadObjects(groupPath)
	if err != nil {
		return err
	}
	if len(objs) != 1 {
		return fmt.Errorf("--pod-group %s: holds %d objects, want one PodGroup", groupPath, len(objs))
	}
	if in.PodGroup, err = eval.PodGroupFromObject(objs[0]); err != nil {
		return fmt.Errorf("--pod-group %s: %w", groupPath, err)
	}
	if in.Members, err = eval.ReadPods(membersPath); err != nil {
		return err
	}
	if err := eval.CheckMembers(in.PodGroup, in.Members); err != nil {
		return fmt.Errorf("--pod %s: %w", membersPath, err)
	}
	if in.Nodes, err = eval.ReadNodes(nodesPath); err != nil {
		return err
	}
	if podsPath != "" {
		if in.Pods, err = eval.ReadPods(podsPath); err != nil {
			return err
		}
	}
	if objectsPath != "" {
		if in.Objects, err = eval.ReadObjects(objectsPath); err != nil {
			return err
		}
	}
	ctx := context.Background()
	ev, err := eval.Load(ctx, specs)
	if err != nil {
		return err
	}
	defer ev.Close(ctx)
	warnMissingObjects(stderr, ev, in.Objects, objectsPath != "")
	rep, err := ev.EvaluateGroup(ctx, in)
	if err != nil {
		return err
	}
	if output == "json" {
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		printGroup(stdout, rep)
	}
	return (&eval.Report{Failures: rep.Failures}).Err()
}

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
		if pf := rep.PostFilter; pf != nil {
			fmt.Fprintf(w, "pod group post filter: %s", pf.Code)
			var noms []string
			for _, pod := range slices.Sorted(maps.Keys(pf.Nominated)) {
				noms = append(noms, pod+"="+pf.Nominated[pod])
			}
			if len(noms) > 0 {
				fmt.Fprintf(w, ", nominated %s", strings.Join(noms, " "))
			}
			fmt.Fprintln(w)
		}
		for _, f := range rep.Failures {
			fmt.Fprintf(w, "policy failure: %s\n", f)
		}
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
