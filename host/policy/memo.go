package policy

import (
	"context"
	"time"

	fwk "k8s.io/kube-scheduler/framework"
)

// maxMemoAge bounds how long a cycle's raw scores serve later cycles: the
// scheduler's own batching reuses a cycle's results for at most 500 ms.
const maxMemoAge = 500 * time.Millisecond

// scoreMemo is the raw scores a version gave the nodes of one cycle, for a
// pod signature. It is never changed once stored.
type scoreMemo struct {
	signature string
	at        time.Time
	nodes     map[string]memoScore
}

type memoScore struct {
	generation int64
	raw        int64
}

// ScoreAllMemo is ScoreAll for a version that declared what it reads of the
// pod (PolicyInfo.signature) and can score without normalising
// (wasmsched_score_nodes_raw): it returns raw scores (Normalized false) and
// asks the guest only for the nodes whose raw score the previous cycle
// did not give: a pod of the same signature, within maxMemoAge, on a node
// of the same generation (an unchanged node) has the same raw score. When
// the scheduler reuses a cycle's results for the next pod of the same
// signature (opportunistic batching), it scores its cached nodes again,
// all but one unchanged: the guest scores that one. Other versions get
// ScoreAll. Calls come from one scheduling cycle at a time.
func (p *Policy) ScoreAllMemo(ctx context.Context, c *Cycle, nodes []fwk.NodeInfo) (Scores, error) {
	if !p.scoresRaw || p.view == nil || len(nodes) == 0 {
		return p.ScoreAll(ctx, c, nodes)
	}
	sig := c.signature(p.view)
	now := time.Now()
	var missing []int
	prev := p.memo.Load()
	if prev != nil && prev.signature == sig && now.Sub(prev.at) < maxMemoAge {
		for i, ni := range nodes {
			if m, ok := prev.nodes[ni.Node().Name]; !ok || m.generation != ni.GetGeneration() {
				missing = append(missing, i)
			}
		}
		if len(missing) > len(nodes)/2 {
			missing = nil
			prev = nil
		}
	} else {
		prev = nil
	}
	ask := nodes
	if prev != nil {
		ask = make([]fwk.NodeInfo, len(missing))
		for k, i := range missing {
			ask[k] = nodes[i]
		}
	}
	res := Scores{Bad: -1, Status: success}
	var raw []int64
	if len(ask) > 0 {
		asked, err := p.scoreNodes(ctx, c, ask, true)
		if err != nil {
			return Scores{Bad: -1}, err
		}
		if asked.Bad >= 0 {
			if prev != nil && asked.Bad < len(missing) {
				asked.Bad = missing[asked.Bad]
			}
			return asked, nil
		}
		raw = asked.Values
	}
	values := raw
	if prev != nil {
		values = make([]int64, len(nodes))
		for i, ni := range nodes {
			values[i] = prev.nodes[ni.Node().Name].raw
		}
		for k, i := range missing {
			values[i] = raw[k]
		}
	}
	memo := &scoreMemo{signature: sig, at: now, nodes: make(map[string]memoScore, len(nodes))}
	for i, ni := range nodes {
		memo.nodes[ni.Node().Name] = memoScore{generation: ni.GetGeneration(), raw: values[i]}
	}
	p.memo.Store(memo)
	res.Values = values
	return res, nil
}

// signature is the cycle's pod as a version that declared view sees it,
// without its identity: equal for pods the version judges alike.
func (c *Cycle) signature(view *podView) string {
	if s, ok := c.sigs.Load(view); ok {
		return s.(string)
	}
	s := string(view.signature(c.podMessage()))
	c.sigs.Store(view, s)
	return s
}
