// Package eval runs policies offline against a pod and a set of nodes, the
// way the scheduler would run them, through the same host code
// (package policy). It backs `wasmsched eval` and the wasm-level tests of
// the examples.
package eval

import (
	"context"
	"fmt"
	"sort"

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
// and weights, and Permit on the selected node. Policy failures are
// reported as Error verdicts, as the scheduler would with failurePolicy
// Fail; only bad input is returned as an error.
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
		if err != nil {
			return e.rejectAll(rep, "Error", err.Error()), nil
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
			if err != nil {
				r.Code, r.Reasons, ok = "Error", []string{err.Error()}, false
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
				err = fmt.Errorf("policy %s: score: %s %v", p.Name(), policy.CodeName(s.Code), s.Reasons)
			}
			if err != nil {
				rep.Nodes[i].Code, rep.Nodes[i].Reasons = "Error", []string{err.Error()}
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
				err = fmt.Errorf("policy %s: normalize_score: %s %v", p.Name(), policy.CodeName(s.Code), s.Reasons)
			}
			if err != nil {
				for _, i := range feasible {
					rep.Nodes[i].Code, rep.Nodes[i].Reasons = "Error", []string{err.Error()}
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
				rep.Nodes[i].Code, rep.Nodes[i].Reasons = "Error", []string{fmt.Sprintf("policy %s: score %d for node %s is outside 0..100", p.Name(), v, rep.Nodes[i].Name)}
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
		rep.Permit = Verdict{Code: "Skip", Reasons: []string{"no node passed Filter"}}
		return rep, nil
	}
	rep.Selected = rep.Nodes[best].Name
	rep.Permit = e.permit(ctx, c, nodes[best])
	return rep, nil
}

func (e *Evaluator) permit(ctx context.Context, c *policy.Cycle, ni fwk.NodeInfo) Verdict {
	v := Verdict{Code: "Success", Reasons: []string{}}
	for _, p := range e.policies {
		if !p.Implements(abiv1.Point_POINT_PERMIT) {
			continue
		}
		res, err := p.Permit(ctx, c, ni, nil)
		if err != nil {
			return Verdict{Code: "Error", Reasons: []string{err.Error()}}
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
