package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/eval"
	"github.com/wasmsched/wasmsched/host/explain"
	"github.com/wasmsched/wasmsched/host/source"
)

const diffUsage = `Usage: wasmsched diff NAME NEW.wasm [--settings JSON|@FILE] [--scheduler-name S] [--namespace NS] [--kubeconfig PATH] [-o table|json]

Previews a push: which pending pods of the cluster would go elsewhere, or
stop or start fitting, if the SchedulingPolicy NAME ran NEW.wasm (with
--settings, else the same settings) instead of the revision serving now.

For every pending pod (spec.nodeName empty, not terminated; only those of
scheduler S with --scheduler-name), both versions are evaluated offline, as
wasmsched eval does, against the cluster's nodes and bound pods, and the
pods whose verdict (schedulable or not, and why) or best node (highest
total score, ties to the first node by name) differ are listed.

Only this one policy is evaluated: not the rest of the scheduler profile
(the in-tree plugins, other policies), so the nodes shown are the policy's
choice, not necessarily the scheduler's. It writes nothing and exits 0
whatever the outcome.

`

func runDiff(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("diff", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, diffUsage)
		fs.PrintDefaults()
	}
	settingsFlag := fs.String("settings", "", "the new version's settings: JSON, or @FILE (default: the serving revision's)")
	schedulerName := fs.String("scheduler-name", "", "only pending pods with this spec.schedulerName (default: every pending pod)")
	namespace := fs.String("namespace", defaultNamespace, "the scheduler's namespace")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	output := fs.String("o", "table", "output format: table or json")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		fs.Usage()
		return errUsage
	}
	if *output != "table" && *output != "json" {
		return fmt.Errorf("unknown output format %q (want table or json)", *output)
	}
	name, path := pos[0], pos[1]
	settings, err := readSettings(*settingsFlag)
	if err != nil {
		return err
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	c, err := connect(*kubeconfig, *namespace)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	_, sp, err := c.getPolicy(ctx, name)
	if err != nil {
		return fmt.Errorf("read schedulingpolicy %s/%s: %w", c.namespace, name, err)
	}
	oldRev := api.SpecRevision(sp)
	if sp.Status.Serving != nil {
		oldRev = *sp.Status.Serving
	}
	old, err := (&explain.Client{Kube: c.client, Namespace: c.namespace}).Fetch(ctx, oldRev)
	if err != nil {
		return fmt.Errorf("serving revision %s: %w", oldRev.Short(), err)
	}
	newSpec := *sp.Spec.DeepCopy()
	newSpec.Module = api.Module{SHA256: source.Digest(wasm)}
	newSpec.Settings = oldRev.Settings
	if settings != nil {
		newSpec.Settings = settings
	}
	newRev := api.RevisionOf(&newSpec)

	load := func(what string, wasm []byte, rev api.Revision) (*eval.Evaluator, error) {
		ev, err := eval.Load(ctx, []eval.PolicySpec{{Name: name, Wasm: wasm, Settings: rev.Settings,
			Weight: sp.Spec.Weight, FailurePolicy: string(sp.Spec.FailurePolicy), Engine: explain.EngineConfig(rev)}})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return ev, nil
	}
	oldEv, err := load("serving revision "+oldRev.Short(), old, oldRev)
	if err != nil {
		return err
	}
	defer oldEv.Close(ctx)
	newEv, err := load(path, wasm, newRev)
	if err != nil {
		return err
	}
	defer newEv.Close(ctx)

	nodes, bound, pending, err := clusterState(ctx, c, *schedulerName)
	if err != nil {
		return err
	}
	res := diffResult{Pending: len(pending), Changes: []podChange{}}
	for _, pod := range pending {
		in := eval.Input{Pod: pod, Nodes: nodes, Pods: bound}
		before, err := outcome(ctx, oldEv, in)
		if err != nil {
			return err
		}
		after, err := outcome(ctx, newEv, in)
		if err != nil {
			return err
		}
		if before != after {
			res.Changes = append(res.Changes, podChange{Pod: pod.Namespace + "/" + pod.Name, Serving: before, New: after})
		}
	}
	res.Changed = len(res.Changes)
	if *output == "json" {
		return writeJSON(stdout, res)
	}
	if len(res.Changes) > 0 {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "POD\tSERVING\tNEW")
		for _, ch := range res.Changes {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", ch.Pod, ch.Serving, ch.New)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(stdout, "%d of %d pending pods would change (policy %s: serving %s, new %s; this policy alone, not the whole profile)\n",
		res.Changed, res.Pending, name, oldRev.Short(), newRev.Short())
	return err
}

// diffResult is diff -o json.
type diffResult struct {
	Pending int         `json:"pending"`
	Changed int         `json:"changed"`
	Changes []podChange `json:"changes"`
}

type podChange struct {
	Pod     string `json:"pod"`
	Serving string `json:"serving"`
	New     string `json:"new"`
}

// clusterState reads the nodes (sorted by name, so that ties go to the
// first by name), the pods bound to them and the pending pods (of
// schedulerName, when given), sorted by namespace and name.
func clusterState(ctx context.Context, c *cluster, schedulerName string) (nodes []*v1.Node, bound, pending []*v1.Pod, err error) {
	nl, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list nodes: %w", err)
	}
	known := map[string]bool{}
	for i := range nl.Items {
		nodes = append(nodes, &nl.Items[i])
		known[nl.Items[i].Name] = true
	}
	slices.SortFunc(nodes, func(a, b *v1.Node) int { return strings.Compare(a.Name, b.Name) })
	pl, err := c.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list pods: %w", err)
	}
	for i := range pl.Items {
		p := &pl.Items[i]
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		switch {
		case p.Spec.NodeName != "":
			if known[p.Spec.NodeName] {
				bound = append(bound, p)
			}
		case p.DeletionTimestamp == nil && (schedulerName == "" || p.Spec.SchedulerName == schedulerName):
			pending = append(pending, p)
		}
	}
	slices.SortFunc(pending, func(a, b *v1.Pod) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return nodes, bound, pending, nil
}

// maxReasons bounds the reasons an unschedulable outcome quotes.
const maxReasons = 3

// outcome is a pod's fate under one evaluator: the node it would go to, or
// "unschedulable: " and why (the cycle's failure, or the nodes' distinct
// reasons in node order).
func outcome(ctx context.Context, ev *eval.Evaluator, in eval.Input) (string, error) {
	rep, err := ev.Evaluate(ctx, in)
	if err != nil {
		return "", fmt.Errorf("pod %s/%s: %w", in.Pod.Namespace, in.Pod.Name, err)
	}
	if rep.Selected != "" {
		return rep.Selected, nil
	}
	if rep.Error != "" {
		return "unschedulable: " + oneLineMsg(rep.Error), nil
	}
	var reasons []string
	for _, n := range rep.Nodes {
		for _, r := range n.Reasons {
			if !slices.Contains(reasons, r) {
				reasons = append(reasons, r)
			}
		}
	}
	if len(in.Nodes) == 0 {
		reasons = []string{"no nodes"}
	}
	if len(reasons) > maxReasons {
		reasons = append(reasons[:maxReasons], fmt.Sprintf("and %d more", len(reasons)-maxReasons))
	}
	return "unschedulable: " + oneLineMsg(strings.Join(reasons, "; ")), nil
}
