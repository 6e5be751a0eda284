package explain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wasmsched/wasmsched/host/clusterctx"
	"github.com/wasmsched/wasmsched/host/eval"
)

// Note is what every explanation says of itself.
const Note = "a re-evaluation now, against the cluster as it is: not a record of the scheduler's decision (a bound pod is judged as if unplaced, without itself)"

// Loaded is a profile's policies loaded for evaluation, each in the
// sandbox its revision asks for (the scheduler's timeout and memory
// limit). Safe for concurrent use: evaluations take turns.
type Loaded struct {
	Profile *Profile
	mu      sync.Mutex
	ev      *eval.Evaluator
	kinds   []clusterctx.Kind
}

// Load fetches (unless a what-if file gave them) and loads the modules of
// prof's policies. An error names the policy.
func (c *Client) Load(ctx context.Context, prof *Profile) (*Loaded, error) {
	specs := make([]eval.PolicySpec, len(prof.Policies))
	for i := range prof.Policies {
		p := &prof.Policies[i]
		if p.wasm == nil {
			wasm, err := c.fetchPolicy(ctx, p)
			if err != nil {
				return nil, fmt.Errorf("policy %s, revision %s: %w", p.Name, p.Short(), err)
			}
			p.wasm = wasm
		}
		specs[i] = eval.PolicySpec{Name: p.Name, Wasm: p.wasm, Settings: p.Revision.Settings, Weight: p.Weight,
			FailurePolicy: p.FailurePolicy, Engine: EngineConfig(p.Revision)}
	}
	ev, err := eval.Load(ctx, specs)
	if err != nil {
		return nil, err
	}
	l := &Loaded{Profile: prof, ev: ev}
	seen := map[clusterctx.Kind]bool{}
	for _, p := range ev.Policies() {
		for _, k := range p.ContextKinds() {
			if !seen[k] {
				seen[k] = true
				l.kinds = append(l.kinds, k)
			}
		}
	}
	return l, nil
}

// Close releases the policies.
func (l *Loaded) Close(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ev != nil {
		l.ev.Close(ctx)
		l.ev = nil
	}
}

// Result is one pod's explanation, shaped for -o json and the web page.
type Result struct {
	Note        string    `json:"note"`
	EvaluatedAt time.Time `json:"evaluatedAt"`
	Namespace   string    `json:"namespace"`
	Name        string    `json:"name"`
	// Profile is the pod's scheduler profile (spec.schedulerName) and the
	// policies run, in order.
	Profile string `json:"profile"`
	// Static: the profile's policies are static (the plugin arguments'
	// `policies:`), as scheduler replica Replica reports them.
	Static   bool      `json:"static,omitempty"`
	Replica  string    `json:"replica,omitempty"`
	Policies []Policy  `json:"policies"`
	Skipped  []Skipped `json:"skipped,omitempty"`
	Shadows  []string  `json:"shadows,omitempty"`
	// Node is where the pod is bound, "" while Pending; SchedulerMessage
	// is the scheduler's own message from the pod's PodScheduled
	// condition.
	Node             string `json:"node,omitempty"`
	SchedulerMessage string `json:"schedulerMessage,omitempty"`
	// Chosen is the node the policies would choose now ("" for none):
	// the highest weighted total, ties to the first node by name (the
	// scheduler breaks ties at random, and its in-tree plugins score
	// too).
	Chosen   string `json:"chosen"`
	Feasible int    `json:"feasible"`
	// TotalNodes is the number of nodes evaluated; Nodes may hold a page
	// of them (Page).
	TotalNodes int               `json:"totalNodes"`
	Nodes      []eval.NodeResult `json:"nodes"`
	Permit     eval.Verdict      `json:"permit"`
	Nominated  string            `json:"nominated,omitempty"`
	// Error is a failed cycle (a Score failure under failurePolicy Fail).
	Error string `json:"error,omitempty"`
	// Failures are the policy failures (trap, timeout, memory, a broken
	// answer), each naming the policy, its version and the call.
	Failures []string `json:"failures,omitempty"`
	// Took is how long the evaluation took.
	Took time.Duration `json:"took"`
}

// Explain reads the objects the policies declared they read and runs pod
// through l's policies against cl.
func (c *Client) Explain(ctx context.Context, l *Loaded, cl *Cluster, pod *v1.Pod) (*Result, error) {
	objects, err := c.readObjects(ctx, l.kinds)
	if err != nil {
		return nil, err
	}
	return l.Explain(ctx, cl, objects, pod)
}

// Explain runs pod through the policies against cl and objects.
func (l *Loaded) Explain(ctx context.Context, cl *Cluster, objects []*unstructured.Unstructured, pod *v1.Pod) (*Result, error) {
	in := cl.input(pod, objects)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ev == nil {
		return nil, fmt.Errorf("explain: the policies were closed")
	}
	start := time.Now()
	rep, err := l.ev.Evaluate(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	res := &Result{Note: Note, EvaluatedAt: start.UTC(), Namespace: pod.Namespace, Name: pod.Name,
		Profile: l.Profile.Name, Static: l.Profile.Static, Replica: l.Profile.Replica, Policies: l.Profile.Policies, Skipped: l.Profile.Skipped, Shadows: l.Profile.Shadows,
		Node: pod.Spec.NodeName, SchedulerMessage: schedulerMessage(pod),
		Chosen: rep.Selected, Nodes: rep.Nodes, Permit: rep.Permit, Nominated: rep.Nominated,
		Error: rep.Error, Failures: rep.Failures, Took: time.Since(start)}
	res.TotalNodes = len(rep.Nodes)
	for _, n := range rep.Nodes {
		if n.Code == "Success" {
			res.Feasible++
		}
	}
	return res, nil
}

// schedulerMessage is the message of the pod's PodScheduled condition:
// the scheduler's own account of why the pod is Pending.
func schedulerMessage(p *v1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status != v1.ConditionTrue {
			return strings.TrimSpace(c.Reason + ": " + c.Message)
		}
	}
	return ""
}

// Summary is a pod's fate in a result: the chosen node, or
// "unschedulable: " and why (the failed cycle, or the nodes' distinct
// reasons, at most three).
func (r *Result) Summary() string {
	if r.Chosen != "" {
		return r.Chosen
	}
	if r.Error != "" {
		return "unschedulable: " + oneLine(r.Error)
	}
	var reasons []string
	for _, n := range r.Nodes {
		for _, x := range n.Reasons {
			if !slices.Contains(reasons, x) {
				reasons = append(reasons, x)
			}
		}
	}
	if len(r.Nodes) == 0 {
		reasons = []string{"no nodes"}
	}
	if len(reasons) > 3 {
		reasons = append(reasons[:3], fmt.Sprintf("and %d more", len(reasons)-3))
	}
	return "unschedulable: " + oneLine(strings.Join(reasons, "; "))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Move is a pending pod whose fate a what-if changes.
type Move struct {
	Pod     string `json:"pod"`
	Serving string `json:"serving"`
	WhatIf  string `json:"whatIf"`
}

// Moves evaluates every pending pod of the profile (spec.schedulerName)
// under serving and whatIf and returns those whose fate differs, and how
// many were evaluated.
func (c *Client) Moves(ctx context.Context, serving, whatIf *Loaded, cl *Cluster) ([]Move, int, error) {
	kinds := append(append([]clusterctx.Kind(nil), serving.kinds...), whatIf.kinds...)
	objects, err := c.readObjects(ctx, uniqueKinds(kinds))
	if err != nil {
		return nil, 0, err
	}
	moves := []Move{}
	n := 0
	for _, p := range cl.Pods {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || p.Spec.SchedulerName != serving.Profile.Name {
			continue
		}
		n++
		before, err := serving.Explain(ctx, cl, objects, p)
		if err != nil {
			return nil, n, err
		}
		after, err := whatIf.Explain(ctx, cl, objects, p)
		if err != nil {
			return nil, n, err
		}
		if b, a := before.Summary(), after.Summary(); b != a {
			moves = append(moves, Move{Pod: p.Namespace + "/" + p.Name, Serving: b, WhatIf: a})
		}
	}
	return moves, n, nil
}

func uniqueKinds(ks []clusterctx.Kind) []clusterctx.Kind {
	seen := map[clusterctx.Kind]bool{}
	var out []clusterctx.Kind
	for _, k := range ks {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}
