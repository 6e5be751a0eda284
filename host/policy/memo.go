package policy

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// maxMemoAge bounds how long a cycle's raw scores serve later cycles: the
// scheduler's own batching reuses a cycle's results for at most 500 ms.
const maxMemoAge = 500 * time.Millisecond

// scoreMemo is the raw scores a version gave the nodes of the last cycle
// scored through it, for a pod signature, by node handle: an entry belongs
// to that cycle when it carries the cycle's number (seq), so a cycle
// stores its scores without clearing the others and looks them up without
// hashing more than each node's name once.
type scoreMemo struct {
	mu        sync.Mutex
	signature string
	at        time.Time
	seq       uint64 // the last cycle's number; 0 before the first
	entries   []memoScore
	handles   []int32 // scratch: the handles of a cycle's nodes
	// keys are the handles of the nodes of the calls so far, by position
	// (NodeSlots); cache answers the others by the address of the name.
	keys  NodeSlots[int32]
	cache handleCache
}

type memoScore struct {
	seq        uint64
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
// all but one unchanged: the guest scores that one. (A rescore whose only
// scoring policy gave the scheduler its raw scores does not come here:
// compose.Cycle.Rescore leaves those to the scheduler. This serves the
// other compositions.) Other versions get ScoreAll.
func (p *Policy) ScoreAllMemo(ctx context.Context, c *Cycle, nodes []fwk.NodeInfo) (Scores, error) {
	if !p.scoresRaw || p.view == nil || len(nodes) == 0 {
		return p.ScoreAll(ctx, c, nodes)
	}
	sig := c.signature(p.view)
	now := time.Now()
	memo := &p.memo
	memo.mu.Lock()
	defer memo.mu.Unlock()
	hs := memo.handles[:0]
	handle := func(n *v1.Node) int32 { return memo.cache.get(&p.handles, n.Name) }
	for i, ni := range nodes {
		hs = append(hs, memo.keys.At(i, ni.Node(), handle))
	}
	memo.handles = hs
	reuse := memo.seq != 0 && memo.signature == sig && now.Sub(memo.at) < maxMemoAge
	var missing []int
	if reuse {
		for i, ni := range nodes {
			if h := int(hs[i]); h >= len(memo.entries) || memo.entries[h].seq != memo.seq || memo.entries[h].generation != ni.GetGeneration() {
				missing = append(missing, i)
			}
		}
		reuse = len(missing) <= len(nodes)/2
	}
	ask := nodes
	if reuse {
		ask = make([]fwk.NodeInfo, len(missing))
		for k, i := range missing {
			ask[k] = nodes[i]
		}
	}
	var raw []int64
	if len(ask) > 0 {
		asked, err := p.scoreNodes(ctx, c, ask, true)
		if err != nil {
			return Scores{Bad: -1}, err
		}
		if asked.Bad >= 0 {
			if reuse && asked.Bad < len(missing) {
				asked.Bad = missing[asked.Bad]
			}
			return asked, nil
		}
		raw = asked.Values
	}
	values := raw
	if reuse {
		values = make([]int64, len(nodes))
		for i, h := range hs {
			if int(h) < len(memo.entries) { // a node new since: among missing
				values[i] = memo.entries[h].raw
			}
		}
		for k, i := range missing {
			values[i] = raw[k]
		}
	}
	if n := int(p.handles.size()); n > len(memo.entries) {
		memo.entries = append(memo.entries, make([]memoScore, n-len(memo.entries))...)
	}
	memo.seq++
	memo.signature, memo.at = sig, now
	for i, ni := range nodes {
		memo.entries[hs[i]] = memoScore{seq: memo.seq, generation: ni.GetGeneration(), raw: values[i]}
	}
	return Scores{Bad: -1, Status: success, Values: values}, nil
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
