// Package eval runs policies offline against a pod and a set of nodes, the
// way the scheduler would run them, through the same host code: the
// policies run in host/policy and are composed by host/compose, as in the
// WasmPolicy plugin, so eval decides what the scheduler decides. It backs
// `wasmsched eval` and the wasm-level tests of the examples. It never talks
// to a cluster.
package eval

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/compose"
	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/policy"
)

// PolicySpec is one policy to evaluate.
type PolicySpec struct {
	// Name identifies the policy in reasons and errors; defaults to the
	// file name without extension at the CLI.
	Name     string
	Wasm     []byte
	Settings []byte
	// Weight weighs the policy's normalised score against the others' (the
	// total is the weighted sum divided by the sum of weights); 0 means 1.
	Weight int64
	// FailurePolicy is what a failure of the policy does, as the plugin's
	// failurePolicy argument: FailurePolicyFail (the default) or
	// FailurePolicyIgnore.
	FailurePolicy string
	Engine        engine.Config
}

// The failure policies, as the plugin's failurePolicy argument spells them.
const (
	FailurePolicyFail   = "Fail"
	FailurePolicyIgnore = "Ignore"
)

// Input is the cluster state to evaluate against.
type Input struct {
	Pod   *v1.Pod
	Nodes []*v1.Node
	// Pods already placed: each counts toward the node in spec.nodeName,
	// and toward its tenants' usage for policies that read it.
	Pods []*v1.Pod
	// Objects are the cluster objects policies that declared context
	// read (ReadObjects): each policy sees those of the kinds it declared,
	// as the scheduler's informers would give them.
	Objects []*unstructured.Unstructured
	// Detail asks for each policy's own verdict and raw and normalised
	// score on every node (NodeResult.Policies, in the order of
	// Report.Policies), for `wasmsched explain`.
	Detail bool

	// group is the pod's PodGroup and groupCycle the pod-group cycle
	// the pod's cycle is part of (EvaluateGroup sets them).
	group      *abiv1.PodGroup
	groupCycle *abiv1.GroupCycle
}

// Report is the outcome, shaped for `wasmsched eval -o json`.
type Report struct {
	Pod string `json:"pod"`
	// Policies names the policies in order, with Input.Detail.
	Policies []string     `json:"policies,omitempty"`
	Nodes    []NodeResult `json:"nodes"`
	Permit   Verdict      `json:"permit"`
	Selected string       `json:"selected"`
	// Nominated is the node a PostFilter nominated when no node fit.
	Nominated string `json:"nominated,omitempty"`
	// Error is set when the scheduling cycle failed (a Score failure under
	// failurePolicy Fail): the scheduler selects no node and retries the
	// pod later.
	Error string `json:"error,omitempty"`
	// Failures lists, in the order they happened, the policy failures the
	// scheduler would apply a failurePolicy to: a trap, a timeout, memory
	// exhaustion, an answer that breaks the ABI, a score outside 0..100, or
	// a guest's own Error verdict. Each names the policy, its version, the
	// call and what went wrong. Under failurePolicy Fail the verdicts
	// concerned quote it after "<policy>: policy failed (failurePolicy
	// Fail): ".
	Failures []string `json:"failures,omitempty"`
}

// Err returns the report's failures as one error, or nil when there were
// none: the first failure, and how many more followed.
func (r *Report) Err() error {
	switch len(r.Failures) {
	case 0:
		return nil
	case 1:
		return errors.New(r.Failures[0])
	}
	return fmt.Errorf("%s (and %d more policy failures)", r.Failures[0], len(r.Failures)-1)
}

// oneLine keeps an error message on one line, so that it reads as one
// line at the CLI and in a table cell.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// NodeResult is one node's verdict; Score is set for nodes that passed.
type NodeResult struct {
	Name    string   `json:"name"`
	Code    string   `json:"code"`
	Reasons []string `json:"reasons"`
	Score   *int64   `json:"score,omitempty"`
	// Policies holds each policy's verdict and scores, in the order of
	// Report.Policies, with Input.Detail.
	Policies []PolicyVerdict `json:"policies,omitempty"`
}

// Verdict is a code and its reasons.
type Verdict struct {
	Code    string   `json:"code"`
	Reasons []string `json:"reasons"`
	// Wait is how long the pod waits at Permit, for code Wait: the longest
	// any policy asked, at most 15 minutes.
	Wait string `json:"wait,omitempty"`
}

// Evaluator holds loaded policies; load once, evaluate many inputs.
type Evaluator struct {
	specs    []PolicySpec
	policies []*policy.Policy
	ctx      *evalContext // nil when no policy reads context
}

// Load compiles and initialises every policy, in order.
func Load(ctx context.Context, specs []PolicySpec) (*Evaluator, error) {
	e := &Evaluator{specs: specs}
	for _, s := range specs {
		if s.FailurePolicy != "" && s.FailurePolicy != FailurePolicyFail && s.FailurePolicy != FailurePolicyIgnore {
			return nil, fmt.Errorf("policy %s: failurePolicy %q is neither %s nor %s", s.Name, s.FailurePolicy, FailurePolicyFail, FailurePolicyIgnore)
		}
		p, err := policy.Load(ctx, policy.Options{Name: s.Name, Wasm: s.Wasm, Settings: s.Settings, Engine: s.Engine, MaxInstances: 1})
		if err != nil {
			e.Close(ctx)
			return nil, err
		}
		e.policies = append(e.policies, p)
	}
	if err := e.bindContext(); err != nil {
		e.Close(ctx)
		return nil, err
	}
	return e, nil
}

// Policies returns the loaded policies.
func (e *Evaluator) Policies() []*policy.Policy { return e.policies }

// Close releases the policies.
func (e *Evaluator) Close(ctx context.Context) {
	for _, p := range e.policies {
		_ = p.Close(ctx)
	}
}

// NodeInfos builds the scheduler's view of the nodes, pods counted.
func NodeInfos(in Input) ([]fwk.NodeInfo, error) {
	byNode := map[string][]*v1.Pod{}
	known := map[string]bool{}
	for _, n := range in.Nodes {
		if known[n.Name] {
			return nil, fmt.Errorf("node %q is listed twice", n.Name)
		}
		known[n.Name] = true
	}
	for _, p := range in.Pods {
		if p.Spec.NodeName == "" {
			return nil, fmt.Errorf("pod %s/%s in the placed pods has no spec.nodeName", p.Namespace, p.Name)
		}
		if !known[p.Spec.NodeName] {
			return nil, fmt.Errorf("pod %s/%s is placed on node %q, which is not among the nodes", p.Namespace, p.Name, p.Spec.NodeName)
		}
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	out := make([]fwk.NodeInfo, len(in.Nodes))
	for i, n := range in.Nodes {
		ni := framework.NewNodeInfo(byNode[n.Name]...)
		ni.SetNode(n)
		out[i] = ni
	}
	return out, nil
}

// Evaluate decides the pod's scheduling cycle as the scheduler would with
// the policies as one WasmPolicy plugin (the same composition, host/compose):
// PreFilter; Filter on every node PreFilter leaves (nodes outside its
// subset get the scheduler's own reason); PostFilter when no node fits;
// Score, normalisation and weights when two or more nodes fit (the
// scheduler does not score a single node); then Reserve, Permit and PreBind
// on the selected node, with PostBind after them or Unreserve when one
// stops the pod.
//
// Policy failures get each policy's failurePolicy, as in the scheduler:
// under Fail a failure in Filter makes that node Unschedulable with a
// reason naming the policy, one in Score fails the cycle (Report.Error, no
// node selected). Every failure is listed in Report.Failures (Report.Err).
// Only bad input is returned as an error. A failed call discards its
// instance, as in the scheduler: the next call runs on a fresh one.
func (e *Evaluator) Evaluate(ctx context.Context, in Input) (*Report, error) {
	rep, _, err := e.evaluate(ctx, in)
	return rep, err
}

// evaluate is Evaluate, and the cycle with the node it reserved, if any.
// In a pod-group cycle it stops after Permit: binding waits for the
// group's placement (EvaluateGroup).
func (e *Evaluator) evaluate(ctx context.Context, in Input) (*Report, *reserved, error) {
	if in.Pod == nil {
		return nil, nil, fmt.Errorf("no pod to evaluate")
	}
	nodes, err := NodeInfos(in)
	if err != nil {
		return nil, nil, err
	}
	if err := e.setContext(in); err != nil {
		return nil, nil, err
	}
	rep := &Report{Pod: in.Pod.Namespace + "/" + in.Pod.Name, Nodes: make([]NodeResult, len(nodes))}
	for i, n := range in.Nodes {
		rep.Nodes[i] = NodeResult{Name: n.Name, Code: "Success", Reasons: []string{}}
	}
	obs := &failures{rep: rep}
	var d *detail
	if in.Detail {
		d = newDetail(rep, len(e.policies))
	}
	members := make([]compose.Member, len(e.policies))
	for i, p := range e.policies {
		members[i] = compose.Member{Name: p.Name(), Version: p, Weight: e.specs[i].Weight,
			Ignore: e.specs[i].FailurePolicy == FailurePolicyIgnore, Observer: obs}
		if d != nil {
			rep.Policies = append(rep.Policies, p.Name())
			d.hooks(&members[i], i)
		}
	}
	c := compose.NewCycle(in.Pod, nodes, members)
	c.Policy.Group, c.Policy.GroupCycle = in.group, in.groupCycle

	// PreFilter: a rejection is every node's verdict.
	pre := c.PreFilter(ctx)
	if pre.Status != nil {
		for i := range rep.Nodes {
			rep.Nodes[i].set(pre.Status)
		}
		if d != nil {
			d.prefilter(rep.Policies, pre.Status)
		}
		return e.unschedulable(ctx, rep, c, nodes), nil, nil
	}

	// Filter.
	var feasible []int
	for i, ni := range nodes {
		switch {
		case pre.NodeNames != nil && !pre.NodeNames.Has(rep.Nodes[i].Name):
			// What the scheduler says of a node outside PreFilter's
			// subset.
			rep.Nodes[i].Code = "UnschedulableAndUnresolvable"
			rep.Nodes[i].Reasons = []string{fmt.Sprintf("node(s) didn't satisfy plugin(s) [%s]", compose.Name)}
			continue
		case !pre.Skip:
			if s, _ := c.Filter(ctx, ni); s != nil {
				rep.Nodes[i].set(s)
				continue
			}
		}
		feasible = append(feasible, i)
	}
	if len(feasible) == 0 {
		return e.unschedulable(ctx, rep, c, nodes), nil, nil
	}

	// Score, when there is a choice.
	best := feasible[0]
	if len(feasible) > 1 {
		totals, s := e.score(ctx, c, nodes, feasible)
		if d != nil {
			d.raw(ctx, c, nodes, feasible)
		}
		if s != nil {
			rep.Error = s.Message()
			rep.Permit = Verdict{Code: "Skip", Reasons: []string{"the scheduling cycle failed"}}
			return rep, nil, nil
		}
		// The highest total wins; ties go to the first node in input order
		// (the scheduler breaks ties at random).
		for k, i := range feasible {
			v := totals[k]
			rep.Nodes[i].Score = &v
			if v > *rep.Nodes[best].Score {
				best = i
			}
		}
	}
	rep.Selected = rep.Nodes[best].Name
	if in.groupCycle != nil {
		return e.reserve(ctx, rep, c, nodes[best])
	}
	rep.Permit = e.bind(ctx, c, nodes[best])
	return rep, nil, nil
}

// score runs PreScore, Score and NormalizeScore over the feasible nodes and
// returns their combined scores, all 0 when no policy scores; or the
// failure that failed the cycle.
func (e *Evaluator) score(ctx context.Context, c *compose.Cycle, nodes []fwk.NodeInfo, feasible []int) ([]int64, *compose.Status) {
	infos := make([]fwk.NodeInfo, len(feasible))
	names := make([]string, len(feasible))
	for k, i := range feasible {
		infos[k], names[k] = nodes[i], nodes[i].Node().Name
	}
	if !c.PreScore(ctx, infos) {
		return make([]int64, len(feasible)), nil
	}
	for _, ni := range infos {
		if s := c.Score(ctx, ni); s != nil {
			return nil, s
		}
	}
	return c.NormalizeScore(ctx, names)
}

// unschedulable finishes a cycle in which no node fits: the policies that
// export PostFilter get their say, as in the scheduler.
func (e *Evaluator) unschedulable(ctx context.Context, rep *Report, c *compose.Cycle, nodes []fwk.NodeInfo) *Report {
	rep.Permit = Verdict{Code: "Skip", Reasons: []string{"no node passed Filter"}}
	if !c.Implements(abiv1.Point_POINT_POST_FILTER) {
		return rep
	}
	statuses := make([]policy.NodeStatus, len(nodes))
	for i, ni := range nodes {
		code := abiv1.Code_CODE_UNSCHEDULABLE
		if rep.Nodes[i].Code == "UnschedulableAndUnresolvable" {
			code = abiv1.Code_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE
		}
		statuses[i] = policy.NodeStatus{Node: ni, Status: policy.Status{Code: code, Reasons: rep.Nodes[i].Reasons}}
	}
	rep.Nominated, _ = c.PostFilter(ctx, statuses)
	return rep
}

// bind runs the rest of the cycle on the selected node, as the scheduler
// would: Reserve, Permit, PreBind and PostBind, with Unreserve when
// Reserve, Permit or PreBind stops the pod. The verdict shown as PERMIT is
// the first that stopped the pod, whichever point gave it.
func (e *Evaluator) bind(ctx context.Context, c *compose.Cycle, ni fwk.NodeInfo) Verdict {
	s, _ := c.NodeCall(ctx, abiv1.Point_POINT_RESERVE, ni, nil)
	var wait time.Duration
	if s == nil {
		res := c.Permit(ctx, ni, nil)
		s, wait = res.Status, res.Wait
	}
	if s == nil {
		s, _ = c.NodeCall(ctx, abiv1.Point_POINT_PRE_BIND, ni, nil)
	}
	switch {
	case s == nil:
		c.NodeCall(ctx, abiv1.Point_POINT_POST_BIND, ni, nil)
		return Verdict{Code: "Success", Reasons: []string{}}
	case s.Code == abiv1.Code_CODE_WAIT:
		return Verdict{Code: "Wait", Reasons: nonNil(s.Reasons), Wait: wait.String()}
	}
	c.NodeCall(ctx, abiv1.Point_POINT_UNRESERVE, ni, nil)
	return Verdict{Code: policy.CodeName(s.Code), Reasons: nonNil(s.Reasons)}
}

// set gives a node a composed verdict.
func (n *NodeResult) set(s *compose.Status) {
	n.Code, n.Reasons = policy.CodeName(s.Code), nonNil(s.Reasons)
}

// failures collects the policy failures of an evaluation into its report,
// in order (a compose.Observer). A batched call that failed is not listed:
// the calls made again node by node meet the failure, and that is listed.
type failures struct {
	mu  sync.Mutex
	rep *Report
}

func (f *failures) Called(compose.Call) {}

func (f *failures) Failed(_ context.Context, _ *v1.Pod, _ abiv1.Point, err *engine.CallError, o compose.Outcome) {
	if o == compose.Retry {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rep.Failures = append(f.rep.Failures, oneLine(err.Error()))
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// SortedNames is a helper for tests: the names of nodes with a given code.
func (r *Report) SortedNames(code string) []string {
	var out []string
	for _, n := range r.Nodes {
		if n.Code == code {
			out = append(out, n.Name)
		}
	}
	sort.Strings(out)
	return out
}
