package eval

import (
	"context"
	"sync"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host/compose"
	"github.com/wasmsched/wasmsched/host/policy"
)

// PolicyVerdict is what one policy answered for one node, in a report made
// with Input.Detail.
type PolicyVerdict struct {
	// Code is the policy's Filter verdict ("Success", "Unschedulable",
	// ...), "Error" for a failure, or "" when the policy was not asked:
	// an earlier policy rejected the node (the scheduler stops at the first
	// rejection), PreFilter decided, or the policy does not filter.
	Code    string   `json:"code,omitempty"`
	Reasons []string `json:"reasons,omitempty"`
	// Failure is the failure behind an Error (trap, timeout, memory, an
	// answer that breaks the ABI), naming the policy, version and call.
	Failure string `json:"failure,omitempty"`
	// Raw is the policy's score before normalisation, Normalized after
	// it (0..100, what the weights apply to); both nil when the node was
	// not scored by this policy.
	Raw        *int64 `json:"raw,omitempty"`
	Normalized *int64 `json:"normalized,omitempty"`
}

// detail collects the per-policy verdicts and scores of one evaluation.
// AfterFilter hooks run on Filter's goroutines: mu guards the verdicts.
type detail struct {
	mu    sync.Mutex
	index map[string]int
	rep   *Report
}

func newDetail(rep *Report, policies int) *detail {
	d := &detail{index: make(map[string]int, len(rep.Nodes)), rep: rep}
	for i := range rep.Nodes {
		d.index[rep.Nodes[i].Name] = i
		rep.Nodes[i].Policies = make([]PolicyVerdict, policies)
	}
	return d
}

// hooks sets m's hooks to record policy k's answers.
func (d *detail) hooks(m *compose.Member, k int) {
	m.AfterFilter = func(_ context.Context, _ *compose.Cycle, ni fwk.NodeInfo, s policy.Status, err error) {
		i, ok := d.index[ni.Node().Name]
		if !ok {
			return
		}
		v := PolicyVerdict{Code: policy.CodeName(s.Code), Reasons: s.Reasons}
		if err != nil {
			v = PolicyVerdict{Code: "Error", Failure: oneLine(err.Error())}
		}
		d.mu.Lock()
		d.rep.Nodes[i].Policies[k] = v
		d.mu.Unlock()
	}
	m.AfterScore = func(_ context.Context, _ *compose.Cycle, nodes []fwk.NodeInfo, scores []policy.NodeScore) {
		d.mu.Lock()
		defer d.mu.Unlock()
		for j, ni := range nodes {
			if i, ok := d.index[ni.Node().Name]; ok {
				v := scores[j].Score
				d.rep.Nodes[i].Policies[k].Normalized = &v
			}
		}
	}
}

// prefilter records a PreFilter rejection as the verdict of the policy
// that gave it, on every node.
func (d *detail) prefilter(names []string, s *compose.Status) {
	for k, name := range names {
		if name != s.Policy {
			continue
		}
		for i := range d.rep.Nodes {
			d.rep.Nodes[i].Policies[k] = PolicyVerdict{Code: policy.CodeName(s.Code), Reasons: s.Reasons}
		}
	}
}

// raw records each scoring policy's raw scores of the feasible nodes
// (PreScore's order). A policy whose guest normalised in the same batch is
// asked node by node for its raw Score, as the scheduler's Score point
// would; a failure there leaves Raw unset.
func (d *detail) raw(ctx context.Context, c *compose.Cycle, nodes []fwk.NodeInfo, feasible []int) {
	for k, e := range c.Entries {
		scores, normalized := e.RawScores()
		if scores == nil {
			continue
		}
		for j, i := range feasible {
			v := scores[j]
			if normalized {
				var s policy.Status
				var err error
				if v, s, err = e.Version.Score(ctx, c.Policy, nodes[i]); err != nil || !s.IsSuccess() {
					continue
				}
			}
			d.rep.Nodes[i].Policies[k].Raw = &v
		}
	}
}
