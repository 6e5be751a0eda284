package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/host/eval"
	"github.com/wasmsched/wasmsched/host/explain"
)

const explainUsage = `Usage: wasmsched explain [-n NAMESPACE] POD [--node NODE] [--revision NAME=DIGEST]... [--policy NAME=FILE.wasm]... [--settings NAME=JSON]...
                         [--scheduler-namespace NS] [--kubeconfig PATH] [-o table|json|yaml] [--limit N] [--offset N]

Shows why POD is where it is, or Pending: the live cluster's nodes and pods,
the cluster objects the policies read, and the revisions serving the pod's
scheduler profile (spec.schedulerName), run through the scheduler's own
composition: per node, each policy's verdict and reason, its raw and
normalised score and the weighted total, and the node the policies would
choose beside where the pod is (or the scheduler's own Pending message).

It is a re-evaluation now, not a record of the scheduler's decision: a
bound pod is judged as if unplaced, against the cluster without itself.
Only the WasmPolicy policies are evaluated, not the in-tree plugins.

A profile's policies are its SchedulingPolicies, or its static policies
(the plugin arguments' policies:) as the scheduler publishes them in
wasmsched-status and wasmsched-policy-state; a static policy's module is
read where the scheduler finds it (its source, when it still holds the
module serving; this machine's module cache; content-addressed chunks).

--revision, --policy and --settings ask "what if this policy ran that
version, or with those settings": the
pod is evaluated under both, and the pending pods of the profile whose fate
would change are listed (as wasmsched diff does for one policy).

`

func runExplain(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, explainUsage)
		fs.PrintDefaults()
	}
	namespace := fs.String("n", "default", "the pod's namespace")
	schedNS := fs.String("scheduler-namespace", defaultNamespace, "the scheduler's namespace: its SchedulingPolicies, status ConfigMaps and module chunks")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	output := fs.String("o", "table", "output format: table, json or yaml")
	node := fs.String("node", "", "show this node in full")
	limit := fs.Int("limit", 50, "nodes shown (the chosen, then feasible by score, then the rest); 0 for all")
	offset := fs.Int("offset", 0, "skip this many nodes of that order")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long (each call into a policy has its revision's own deadline)")
	var overrides []explain.Override
	var ovErr error
	fs.Var(funcFlag{func(s string) error {
		o, err := explain.ParseOverride(s, explain.OverrideRevision)
		overrides = append(overrides, o)
		return err
	}, &ovErr}, "revision", "what if policy NAME ran its revision DIGEST (a sha256 or a unique prefix); repeatable")
	fs.Var(funcFlag{func(s string) error {
		o, err := explain.ParseOverride(s, explain.OverridePolicy)
		overrides = append(overrides, o)
		return err
	}, &ovErr}, "policy", "what if policy NAME ran the module FILE.wasm, with its serving settings; repeatable")
	fs.Var(funcFlag{func(s string) error {
		o, err := explain.ParseOverride(s, explain.OverrideSettings)
		overrides = append(overrides, o)
		return err
	}, &ovErr}, "settings", "what if policy NAME ran with the settings JSON (with --revision or --policy: that version's); repeatable")
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case ovErr != nil:
		return ovErr
	case len(pos) != 1:
		fs.Usage()
		return errUsage
	case *output != "table" && *output != "json" && *output != "yaml":
		return fmt.Errorf("unknown output format %q (want table, json or yaml)", *output)
	case *limit < 0 || *offset < 0:
		return errors.New("--limit and --offset must not be negative")
	}
	podNS, podName := *namespace, pos[0]
	if ns, name, ok := strings.Cut(podName, "/"); ok {
		podNS, podName = ns, name
	}
	c, err := connect(*kubeconfig, *schedNS)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	x := &explain.Client{Kube: c.client, Dynamic: c.dyn, Namespace: *schedNS}

	pod, err := x.ReadPod(ctx, podNS, podName)
	if err != nil {
		return err
	}
	prof, err := x.ReadProfile(ctx, pod.Spec.SchedulerName)
	if err != nil {
		return fmt.Errorf("pod %s/%s: %w", podNS, podName, err)
	}
	cl, err := x.ReadCluster(ctx)
	if err != nil {
		return err
	}
	serving, err := x.Load(ctx, prof)
	if err != nil {
		return err
	}
	defer serving.Close(ctx)
	res, err := x.Explain(ctx, serving, cl, pod)
	if err != nil {
		return err
	}
	var wi *whatIfResult
	if len(overrides) > 0 {
		alt := prof
		for _, o := range overrides {
			if alt, err = x.Apply(ctx, alt, o); err != nil {
				return err
			}
		}
		whatIf, err := x.Load(ctx, alt)
		if err != nil {
			return fmt.Errorf("what-if: %w", err)
		}
		defer whatIf.Close(ctx)
		after, err := x.Explain(ctx, whatIf, cl, pod)
		if err != nil {
			return err
		}
		moves, pending, err := x.Moves(ctx, serving, whatIf, cl)
		if err != nil {
			return err
		}
		wi = &whatIfResult{Serving: res.Summary(), WhatIf: after.Summary(), Pending: pending, Moves: moves}
		res = after // the table shows the what-if's answer
	}
	if *node != "" {
		for _, n := range res.Nodes {
			if n.Name == *node {
				return printNode(stdout, res, n, *output)
			}
		}
		return fmt.Errorf("node %q is not among the cluster's %d nodes", *node, len(res.Nodes))
	}
	page, total := res.Page(*offset, *limit)
	switch *output {
	case "json":
		return writeJSON(stdout, explainOutput{page, wi})
	case "yaml":
		b, err := yaml.Marshal(explainOutput{page, wi})
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	}
	return printExplain(stdout, page, total, *offset, wi)
}

// explainOutput is explain -o json and -o yaml.
type explainOutput struct {
	*explain.Result `json:",inline"`
	WhatIf          *whatIfResult `json:"whatIfMoves,omitempty"`
}

// whatIfResult compares the pod's fate under the serving revisions and the
// what-if, and lists the pending pods that would move.
type whatIfResult struct {
	Serving string         `json:"serving"`
	WhatIf  string         `json:"whatIf"`
	Pending int            `json:"pending"`
	Moves   []explain.Move `json:"moves"`
}

func printExplain(w io.Writer, r *explain.Result, total, offset int, wi *whatIfResult) error {
	fmt.Fprintf(w, "pod %s/%s: %s\n", r.Namespace, r.Name, explain.Note)
	kind := ""
	if r.Static {
		kind = " (static policies, as replica " + r.Replica + " reports them)"
	}
	fmt.Fprintf(w, "profile %s%s: %s\n", r.Profile, kind, policyLine(r))
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "  not evaluated: %s: %s\n", s.Name, oneLineMsg(s.Reason))
	}
	if r.Node != "" {
		fmt.Fprintf(w, "now: bound to %s\n", r.Node)
	} else {
		msg := r.SchedulerMessage
		if msg == "" {
			msg = "(no PodScheduled condition yet)"
		}
		fmt.Fprintf(w, "now: Pending; the scheduler says: %s\n", oneLineMsg(msg))
	}
	verdict := r.Summary()
	if r.Node != "" && r.Chosen != "" {
		if r.Chosen == r.Node {
			verdict += " (where it is)"
		} else {
			verdict += " (not where it is: the in-tree plugins, ties, or a changed cluster decide the difference)"
		}
	}
	fmt.Fprintf(w, "policies would choose: %s\n", verdict)
	if wi != nil {
		fmt.Fprintf(w, "what-if: serving revisions choose %s; with the what-if %s\n", wi.Serving, wi.WhatIf)
		fmt.Fprintf(w, "what-if: %d of %d pending pods of the profile would change\n", len(wi.Moves), wi.Pending)
		for _, m := range wi.Moves {
			fmt.Fprintf(w, "  %s: %s -> %s\n", m.Pod, m.Serving, m.WhatIf)
		}
	}
	for _, f := range countFailures(r.Failures) {
		fmt.Fprintf(w, "policy failure: %s\n", f)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "cycle failed: %s\n", oneLineMsg(r.Error))
	}
	fmt.Fprintf(w, "%d nodes, %d feasible; evaluated in %v\n\n", total, r.Feasible, r.Took.Round(time.Millisecond))

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := []string{"NODE", "VERDICT", "TOTAL"}
	for _, p := range r.Policies {
		head = append(head, fmt.Sprintf("%s(x%d)", p.Name, p.Weight))
	}
	head = append(head, "REASONS")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, n := range r.Nodes {
		row := []string{n.Name, n.Code, scoreCell(n.Score)}
		for k := range r.Policies {
			row = append(row, policyCell(n, k))
		}
		row = append(row, oneLineMsg(strings.Join(n.Reasons, "; ")))
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rest := total - offset - len(r.Nodes); rest > 0 {
		fmt.Fprintf(w, "... %d more nodes (--offset %d, --limit 0 for all, or -o json)\n", rest, offset+len(r.Nodes))
	}
	_, err := fmt.Fprintln(w, "policy cells: Filter verdict, raw->normalised score; '-': no Filter verdict (PreFilter skipped Filter, an earlier policy rejected the node, or the policy does not filter)")
	return err
}

// countFailures lists each distinct failure once, with how many calls
// met it.
func countFailures(fs []string) []string {
	var out []string
	n := map[string]int{}
	for _, f := range fs {
		if n[f] == 0 {
			out = append(out, f)
		}
		n[f]++
	}
	for i, f := range out {
		if n[f] > 1 {
			out[i] = fmt.Sprintf("%s (%d calls)", f, n[f])
		}
	}
	return out
}

func policyLine(r *explain.Result) string {
	var parts []string
	for _, p := range r.Policies {
		s := fmt.Sprintf("%s %s (weight %d, failurePolicy %s", p.Name, p.Short(), p.Weight, p.FailurePolicy)
		if p.Source != "" {
			s += ", " + p.Source
		}
		if p.WhatIf != "" {
			s += ", what-if " + p.WhatIf
		}
		parts = append(parts, s+")")
	}
	if len(parts) == 0 {
		return "no policy serves"
	}
	return strings.Join(parts, ", ")
}

func scoreCell(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

// policyCell is one policy's answer for a node in a table cell.
func policyCell(n eval.NodeResult, k int) string {
	if k >= len(n.Policies) {
		return "-"
	}
	v := n.Policies[k]
	cell := "-"
	switch v.Code {
	case "":
	case "Success":
		cell = "ok"
	case "Error":
		cell = "FAILED"
	default:
		cell = v.Code
	}
	if v.Normalized != nil {
		cell += " " + scoreCell(v.Raw) + "->" + scoreCell(v.Normalized)
	}
	return cell
}

// printNode shows one node in full.
func printNode(w io.Writer, r *explain.Result, n eval.NodeResult, output string) error {
	switch output {
	case "json":
		return writeJSON(w, n)
	case "yaml":
		b, err := yaml.Marshal(n)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	fmt.Fprintf(w, "pod %s/%s on node %s: %s\n", r.Namespace, r.Name, n.Name, explain.Note)
	fmt.Fprintf(w, "verdict: %s", n.Code)
	if len(n.Reasons) > 0 {
		fmt.Fprintf(w, ": %s", oneLineMsg(strings.Join(n.Reasons, "; ")))
	}
	fmt.Fprintf(w, "\ntotal score: %s (the weighted mean of the normalised scores)\nchosen: %v\n\n", scoreCell(n.Score), n.Name == r.Chosen)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY\tREVISION\tWEIGHT\tVERDICT\tRAW\tNORMALISED\tREASONS")
	for k, p := range r.Policies {
		var v eval.PolicyVerdict
		if k < len(n.Policies) {
			v = n.Policies[k]
		}
		code := v.Code
		if code == "" {
			code = "-"
		}
		why := strings.Join(v.Reasons, "; ")
		if v.Failure != "" {
			why = v.Failure
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", p.Name, p.Short(), p.Weight, code, scoreCell(v.Raw), scoreCell(v.Normalized), oneLineMsg(why))
	}
	return tw.Flush()
}
