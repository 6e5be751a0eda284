// Package eval runs policies offline against a pod and a set of nodes, the
// way the scheduler would run them, through the same host code
// (package policy). It backs `wasmsched eval` and the wasm-level tests of
// the examples.
package eval

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
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
	Engine engine.Config
}

// Input is the cluster state to evaluate against.
type Input struct {
	Pod   *v1.Pod
	Nodes []*v1.Node
	// Pods already placed: each counts toward the node in spec.nodeName.
	Pods []*v1.Pod
}

// Report is the outcome, shaped for `wasmsched eval -o json`.
type Report struct {
	Pod      string       `json:"pod"`
	Nodes    []NodeResult `json:"nodes"`
	Permit   Verdict      `json:"permit"`
	Selected string       `json:"selected"`
	// Failures lists, in the order they happened, the policy failures the
	// scheduler would apply a failurePolicy to: a trap, a timeout, memory
	// exhaustion, an answer that breaks the ABI, a score outside 0..100, or
	// a guest's own Error verdict. Each names the policy, its version and
	// the call. The nodes concerned show the same text with code Error.
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

// fail records a policy failure and returns its text.
func (r *Report) fail(err error) string {
	msg := oneLine(err.Error())
	r.Failures = append(r.Failures, msg)
	return msg
}

// oneLine keeps an error message on one line, so that it reads as one
// line at the CLI and in a table cell.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// guestError turns a guest's own Error verdict into a failure, as the
// plugin does: the failure policy applies to it as to a trap.
func guestError(p *policy.Policy, call string, s policy.Status) error {
	if s.Code != abiv1.Code_CODE_ERROR {
		return nil
	}
	return &engine.CallError{Policy: p.Name(), Version: p.Version(), Call: call, Kind: engine.KindGuest,
		Err: fmt.Errorf("policy reported an error: %s", strings.Join(s.Reasons, "; "))}
}

// NodeResult is one node's verdict; Score is set for nodes that passed.
type NodeResult struct {
	Name    string   `json:"name"`
	Code    string   `json:"code"`
	Reasons []string `json:"reasons"`
	Score   *int64   `json:"score,omitempty"`
}

// Verdict is a code and its reasons.
type Verdict struct {
	Code    string   `json:"code"`
	Reasons []string `json:"reasons"`
}

// Evaluator holds loaded policies; load once, evaluate many inputs.
type Evaluator struct {
	specs    []PolicySpec
	policies []*policy.Policy
}

// Load compiles and initialises every policy, in order.
func Load(ctx context.Context, specs []PolicySpec) (*Evaluator, error) {
	e := &Evaluator{specs: specs}
	for _, s := range specs {
		p, err := policy.Load(ctx, policy.Options{Name: s.Name, Wasm: s.Wasm, Settings: s.Settings, Engine: s.Engine, MaxInstances: 1})
		if err != nil {
			e.Close(ctx)
			return nil, err
		}
		e.policies = append(e.policies, p)
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

// Evaluate runs PreFilter, Filter on every node, Score with normalisation
// and weights, and Reserve, Permit, PreBind and PostBind on the selected
// node (PostFilter when no node fits, Unreserve when the pod is stopped
// after Reserve). Policy failures are
// reported as Error verdicts, as the scheduler would with failurePolicy
// Fail, and listed in Report.Failures (Report.Err); only bad input is
// returned as an error. A failed call discards its instance, as in the
// scheduler: the next call runs on a fresh one.
func (e *Evaluator) Evaluate(ctx context.Context, in Input) (*Report, error) {
	if in.Pod == nil {
		return nil, fmt.Errorf("no pod to evaluate")
	}
	nodes, err := NodeInfos(in)
	if err != nil {
		return nil, err
	}
	rep := &Report{Pod: in.Pod.Namespace + "/" + in.Pod.Name, Nodes: make([]NodeResult, len(nodes))}
	for i, n := range in.Nodes {
		rep.Nodes[i] = NodeResult{Name: n.Name, Code: "Success", Reasons: []string{}}
	}
	c := policy.NewCycle(in.Pod, nodes)

	// PreFilter.
	skipFilter := make([]bool, len(e.policies))
	allowed := map[string]bool(nil)
	for i, p := range e.policies {
		res, err := p.PreFilter(ctx, c)
		if err == nil {
			err = guestError(p, "pre_filter", res.Status)
		}
		if err != nil {
			return e.rejectAll(rep, "Error", rep.fail(err)), nil
		}
		switch res.Status.Code {
		case abiv1.Code_CODE_SUCCESS:
		case abiv1.Code_CODE_SKIP:
			skipFilter[i] = true
			continue
		default:
			return e.rejectAll(rep, policy.CodeName(res.Status.Code), res.Status.Reasons...), nil
		}
		if res.Restricted {
			set := map[string]bool{}
			for _, n := range res.NodeNames {
				if allowed == nil || allowed[n] {
					set[n] = true
				}
			}
			allowed = set
		}
	}

	// Filter.
	feasible := []int{}
	for i, ni := range nodes {
		r := &rep.Nodes[i]
		if allowed != nil && !allowed[r.Name] {
			r.Code, r.Reasons = "UnschedulableAndUnresolvable", []string{"node is not among the nodes PreFilter selected"}
			continue
		}
		ok := true
		for j, p := range e.policies {
			if skipFilter[j] || !p.Implements(abiv1.Point_POINT_FILTER) {
				continue
			}
			s, err := p.Filter(ctx, c, ni)
			if err == nil {
				err = guestError(p, "filter", s)
			}
			if err != nil {
				r.Code, r.Reasons, ok = "Error", []string{rep.fail(err)}, false
				break
			}
			if !s.IsSuccess() {
				r.Code, r.Reasons, ok = policy.CodeName(s.Code), nonNil(s.Reasons), false
				break
			}
		}
		if ok {
			feasible = append(feasible, i)
		}
	}

	// Score: the weighted sum divided by the total weight, as the plugin
	// combines them.
	totals := make([]int64, len(nodes))
	var weights int64
	for j, p := range e.policies {
		if !p.Implements(abiv1.Point_POINT_SCORE) || len(feasible) == 0 {
			continue
		}
		scores := make([]policy.NodeScore, len(feasible))
		infos := make([]fwk.NodeInfo, len(feasible))
		failed := false
		for k, i := range feasible {
			v, s, err := p.Score(ctx, c, nodes[i])
			if err == nil && !s.IsSuccess() {
				err = fmt.Errorf("policy %s@%s: score: %s %v", p.Name(), p.Version(), policy.CodeName(s.Code), s.Reasons)
			}
			if err != nil {
				rep.Nodes[i].Code, rep.Nodes[i].Reasons = "Error", []string{rep.fail(err)}
				failed = true
				continue
			}
			scores[k], infos[k] = policy.NodeScore{Name: rep.Nodes[i].Name, Score: v}, nodes[i]
		}
		if failed {
			feasible = stillFeasible(rep, feasible)
			continue
		}
		if p.Implements(abiv1.Point_POINT_NORMALIZE_SCORE) {
			s, err := p.NormalizeScore(ctx, c, infos, scores)
			if err == nil && !s.IsSuccess() {
				err = fmt.Errorf("policy %s@%s: normalize_score: %s %v", p.Name(), p.Version(), policy.CodeName(s.Code), s.Reasons)
			}
			if err != nil {
				msg := rep.fail(err)
				for _, i := range feasible {
					rep.Nodes[i].Code, rep.Nodes[i].Reasons = "Error", []string{msg}
				}
				feasible = nil
				break
			}
		}
		w := e.specs[j].Weight
		if w == 0 {
			w = 1
		}
		for k, i := range feasible {
			if v := scores[k].Score; v < 0 || v > 100 {
				rep.Nodes[i].Code, rep.Nodes[i].Reasons = "Error", []string{rep.fail(fmt.Errorf("policy %s@%s: score: %d for node %s is outside 0..100", p.Name(), p.Version(), v, rep.Nodes[i].Name))}
				continue
			}
			totals[i] += w * scores[k].Score
		}
		weights += w
		feasible = stillFeasible(rep, feasible)
	}
	for _, i := range feasible {
		if weights > 0 {
			totals[i] /= weights
		}
		v := totals[i]
		rep.Nodes[i].Score = &v
	}

	// Select: the highest total; ties go to the first node in input order
	// (the scheduler breaks ties at random).
	best := -1
	for _, i := range feasible {
		if best < 0 || totals[i] > totals[best] {
			best = i
		}
	}
	if best < 0 {
		e.postFilter(ctx, rep, c, nodes)
		rep.Permit = Verdict{Code: "Skip", Reasons: []string{"no node passed Filter"}}
		return rep, nil
	}
	rep.Selected = rep.Nodes[best].Name
	rep.Permit = e.bind(ctx, rep, c, nodes[best])
	return rep, nil
}

// postFilter gives the policies that export PostFilter their say when no
// node fits, as the scheduler would; only their failures are reported.
func (e *Evaluator) postFilter(ctx context.Context, rep *Report, c *policy.Cycle, nodes []fwk.NodeInfo) {
	var statuses []policy.NodeStatus
	for i, ni := range nodes {
		code := abiv1.Code_CODE_UNSCHEDULABLE
		if rep.Nodes[i].Code == "UnschedulableAndUnresolvable" {
			code = abiv1.Code_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE
		}
		statuses = append(statuses, policy.NodeStatus{Node: ni, Status: policy.Status{Code: code, Reasons: rep.Nodes[i].Reasons}})
	}
	for _, p := range e.policies {
		if !p.Implements(abiv1.Point_POINT_POST_FILTER) {
			continue
		}
		if _, _, err := p.PostFilter(ctx, c, statuses); err != nil {
			rep.fail(err)
		}
	}
}

// bind runs the rest of the cycle on the selected node, as the scheduler
// would: Reserve, Permit, PreBind and PostBind, with Unreserve when
// Reserve, Permit or PreBind stops the pod. The verdict shown as PERMIT is
// the first that stopped the pod, whichever point gave it.
func (e *Evaluator) bind(ctx context.Context, rep *Report, c *policy.Cycle, ni fwk.NodeInfo) Verdict {
	v := e.nodeCalls(ctx, rep, c, ni, abiv1.Point_POINT_RESERVE)
	if v.Code == "Success" {
		v = e.permit(ctx, rep, c, ni)
	}
	if v.Code == "Success" {
		v = e.nodeCalls(ctx, rep, c, ni, abiv1.Point_POINT_PRE_BIND)
	}
	switch v.Code {
	case "Success":
		e.nodeCalls(ctx, rep, c, ni, abiv1.Point_POINT_POST_BIND)
	case "Wait":
	default:
		e.nodeCalls(ctx, rep, c, ni, abiv1.Point_POINT_UNRESERVE)
	}
	return v
}

// nodeCalls runs Reserve, PreBind, PostBind or Unreserve on every policy
// that exports it, stopping at the first that does not succeed (except for
// PostBind and Unreserve, which have no verdict).
func (e *Evaluator) nodeCalls(ctx context.Context, rep *Report, c *policy.Cycle, ni fwk.NodeInfo, pt abiv1.Point) Verdict {
	informational := pt == abiv1.Point_POINT_POST_BIND || pt == abiv1.Point_POINT_UNRESERVE
	for _, p := range e.policies {
		if !p.Implements(pt) {
			continue
		}
		s, _, err := p.NodeCall(ctx, pt, c, ni, nil)
		if err == nil && !informational {
			err = guestError(p, engine.PointName(pt), s)
		}
		if err != nil {
			msg := rep.fail(err)
			if !informational {
				return Verdict{Code: "Error", Reasons: []string{msg}}
			}
			continue
		}
		if !informational && !s.IsSuccess() {
			return Verdict{Code: policy.CodeName(s.Code), Reasons: nonNil(s.Reasons)}
		}
	}
	return Verdict{Code: "Success", Reasons: []string{}}
}

func (e *Evaluator) permit(ctx context.Context, rep *Report, c *policy.Cycle, ni fwk.NodeInfo) Verdict {
	v := Verdict{Code: "Success", Reasons: []string{}}
	for _, p := range e.policies {
		if !p.Implements(abiv1.Point_POINT_PERMIT) {
			continue
		}
		res, err := p.Permit(ctx, c, ni, nil)
		if err == nil {
			err = guestError(p, "permit", res.Status)
		}
		if err != nil {
			return Verdict{Code: "Error", Reasons: []string{rep.fail(err)}}
		}
		switch res.Status.Code {
		case abiv1.Code_CODE_SUCCESS:
		case abiv1.Code_CODE_WAIT:
			v.Code = "Wait"
			v.Reasons = append(v.Reasons, res.Status.Reasons...)
			if res.Timeout > 0 {
				v.Reasons = append(v.Reasons, fmt.Sprintf("%s: waits up to %v", p.Name(), res.Timeout))
			}
		default:
			return Verdict{Code: policy.CodeName(res.Status.Code), Reasons: nonNil(res.Status.Reasons)}
		}
	}
	return v
}

func (e *Evaluator) rejectAll(rep *Report, code string, reasons ...string) *Report {
	for i := range rep.Nodes {
		rep.Nodes[i].Code, rep.Nodes[i].Reasons = code, nonNil(reasons)
	}
	rep.Permit = Verdict{Code: "Skip", Reasons: []string{"no node passed Filter"}}
	return rep
}

func stillFeasible(rep *Report, feasible []int) []int {
	out := feasible[:0:0]
	for _, i := range feasible {
		if rep.Nodes[i].Code == "Success" {
			out = append(out, i)
		}
	}
	return out
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
