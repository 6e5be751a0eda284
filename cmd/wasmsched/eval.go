package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/eval"
)

var errUsage = errors.New("usage")

// policyFlags collects --policy, --config, --weight and --failure-policy in
// order: each of the others applies to the --policy before it.
type policyFlags struct {
	specs []eval.PolicySpec
	err   error
}

func (f *policyFlags) policy(path string) error {
	wasm, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	name = strings.TrimSuffix(name, ".tinygo")
	f.specs = append(f.specs, eval.PolicySpec{Name: name, Wasm: wasm})
	return nil
}

func (f *policyFlags) config(path string) error {
	if len(f.specs) == 0 {
		return errors.New("--config must follow the --policy it configures")
	}
	last := &f.specs[len(f.specs)-1]
	if last.Settings != nil {
		return fmt.Errorf("policy %s already has a --config", last.Name)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !json.Valid(b) {
		return fmt.Errorf("%s: settings are not valid JSON", path)
	}
	last.Settings = b
	return nil
}

func (f *policyFlags) failurePolicy(s string) error {
	if len(f.specs) == 0 {
		return errors.New("--failure-policy must follow the --policy it applies to")
	}
	if s != eval.FailurePolicyFail && s != eval.FailurePolicyIgnore {
		return fmt.Errorf("failure policy %q is neither %s nor %s", s, eval.FailurePolicyFail, eval.FailurePolicyIgnore)
	}
	f.specs[len(f.specs)-1].FailurePolicy = s
	return nil
}

func (f *policyFlags) weight(s string) error {
	if len(f.specs) == 0 {
		return errors.New("--weight must follow the --policy it weighs")
	}
	w, err := strconv.ParseInt(s, 10, 64)
	if err != nil || w < 1 || w > 100 {
		return fmt.Errorf("weight %q is not an integer in 1..100", s)
	}
	f.specs[len(f.specs)-1].Weight = w
	return nil
}

// funcFlag is a repeatable flag whose errors are kept for after parsing,
// so a bad value is reported as one line rather than with the usage text.
type funcFlag struct {
	fn  func(string) error
	err *error
}

func (f funcFlag) String() string { return "" }
func (f funcFlag) Set(s string) error {
	if *f.err == nil {
		*f.err = f.fn(s)
	}
	return nil
}

func runEval(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var pf policyFlags
	fs.Var(funcFlag{pf.policy, &pf.err}, "policy", "policy module (.wasm); repeat to compose policies in order")
	fs.Var(funcFlag{pf.config, &pf.err}, "config", "settings (JSON file) for the preceding --policy")
	fs.Var(funcFlag{pf.weight, &pf.err}, "weight", "score weight (1..100) for the preceding --policy (default 1)")
	fs.Var(funcFlag{pf.failurePolicy, &pf.err}, "failure-policy", "Fail or Ignore: what a failure of the preceding --policy does, as the plugin's failurePolicy (default Fail)")
	podPath := fs.String("pod", "", "the pod to schedule (YAML or JSON); with --pod-group, the group's members (one or more Pods, in the order the scheduler tries them)")
	groupPath := fs.String("pod-group", "", "a PodGroup (scheduling.k8s.io, YAML or JSON): place --pod's pods as this group, in a pod-group cycle")
	nodesPath := fs.String("nodes", "", "the nodes (multi-document YAML or a List)")
	podsPath := fs.String("pods", "", "pods already placed (spec.nodeName set), counted toward their nodes and their tenants' usage")
	objectsPath := fs.String("objects", "", "cluster objects of any kinds (multi-document YAML) for policies that read context; the resource is the lower-case plural of the kind unless annotated "+eval.ResourceAnnotation)
	output := fs.String("o", "table", "output format: table or json")
	timeout := fs.Duration("timeout", engine.DefaultCallTimeout, "deadline of each call into a policy, as the plugin's timeout argument")
	initTimeout := fs.Duration("init-timeout", engine.DefaultInitTimeout, "deadline of a policy's start-up (_initialize and its settings)")
	memoryLimit := fs.String("memory-limit", "256Mi", "memory limit of each policy instance, as the plugin's memoryLimit argument")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	switch {
	case pf.err != nil:
		return pf.err
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case len(pf.specs) == 0:
		return errors.New("no --policy given")
	case *podPath == "":
		return errors.New("no --pod given")
	case *nodesPath == "":
		return errors.New("no --nodes given")
	case *output != "table" && *output != "json":
		return fmt.Errorf("unknown output format %q (want table or json)", *output)
	}
	limit, err := resource.ParseQuantity(*memoryLimit)
	if err != nil {
		return fmt.Errorf("--memory-limit %q is not a quantity (for example 256Mi): %v", *memoryLimit, err)
	}
	cfg := engine.Config{CallTimeout: *timeout, InitTimeout: *initTimeout, MemoryLimit: uint64(max(limit.Value(), 0))}
	if err := cfg.Validate(); err != nil {
		return err
	}
	for i := range pf.specs {
		pf.specs[i].Engine = cfg
	}
	if *groupPath != "" {
		return runEvalGroup(pf.specs, *groupPath, *podPath, *nodesPath, *podsPath, *objectsPath, *output, stdout, stderr)
	}
	var in eval.Input
	if in.Pod, err = eval.ReadPod(*podPath); err != nil {
		return err
	}
	if in.Nodes, err = eval.ReadNodes(*nodesPath); err != nil {
		return err
	}
	if *podsPath != "" {
		if in.Pods, err = eval.ReadPods(*podsPath); err != nil {
			return err
		}
	}
	if *objectsPath != "" {
		if in.Objects, err = eval.ReadObjects(*objectsPath); err != nil {
			return err
		}
	}
	ctx := context.Background()
	ev, err := eval.Load(ctx, pf.specs)
	if err != nil {
		return err
	}
	defer ev.Close(ctx)
	warnMissingObjects(stderr, ev, in.Objects, *objectsPath != "")
	rep, err := ev.Evaluate(ctx, in)
	if err != nil {
		return err
	}
	if *output == "json" {
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(stdout, "%s\n", b); err != nil {
			return err
		}
	} else if err := printTable(stdout, rep); err != nil {
		return err
	}
	// A policy that failed (trap, timeout, memory, an answer that breaks
	// the ABI, its own Error verdict) makes the run fail: the scheduler
	// would apply its failurePolicy to the pod.
	return rep.Err()
}

func printTable(w io.Writer, rep *eval.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "POD\t%s\n", rep.Pod)
	fmt.Fprintf(tw, "NODE\tVERDICT\tSCORE\tREASONS\n")
	for _, n := range rep.Nodes {
		score := "-"
		if n.Score != nil {
			score = strconv.FormatInt(*n.Score, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n.Name, n.Code, score, strings.Join(n.Reasons, "; "))
	}
	permit := strings.Join(rep.Permit.Reasons, "; ")
	if rep.Permit.Wait != "" {
		permit = strings.TrimPrefix(permit+"; waits up to "+rep.Permit.Wait, "; ")
	}
	fmt.Fprintf(tw, "PERMIT\t%s\t\t%s\n", rep.Permit.Code, permit)
	if rep.Error != "" {
		fmt.Fprintf(tw, "FAILED\t%s\n", rep.Error)
	}
	if rep.Nominated != "" {
		fmt.Fprintf(tw, "NOMINATED\t%s\n", rep.Nominated)
	}
	selected := rep.Selected
	if selected == "" {
		selected = "(none)"
	}
	fmt.Fprintf(tw, "SELECTED\t%s\n", selected)
	return tw.Flush()
}

// warnMissingObjects warns, on stderr, of each kind a policy declares it
// reads of which --objects gives no object: the policy then sees none, as
// in a cluster without any, which may not be what the run meant.
func warnMissingObjects(w io.Writer, ev *eval.Evaluator, objects []*unstructured.Unstructured, given bool) {
	have := map[string]bool{}
	for _, u := range objects {
		if k, err := eval.KindOf(u); err == nil {
			have[k.String()] = true
		}
	}
	for _, p := range ev.Policies() {
		for _, k := range p.ContextKinds() {
			if have[k.String()] {
				continue
			}
			if given {
				fmt.Fprintf(w, "wasmsched eval: warning: policy %s reads %s, and --objects holds none: it sees no such object\n", p.Name(), k)
			} else {
				fmt.Fprintf(w, "wasmsched eval: warning: policy %s reads %s, and no --objects is given: it sees no such object (--objects objects.yaml gives them)\n", p.Name(), k)
			}
		}
	}
}
