package compose

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/policy"
)

// PreScore prepares scoring nodes (the nodes that passed Filter) and reports
// whether any policy scores; false means the scheduler may skip Score and
// NormalizeScore. Each scoring policy scores every node in one batch
// (policy.ScoreAll, which normalises too when the guest exports
// wasmsched_score_nodes; policy.ScoreAllMemo, for a policy that declared
// its pod signature, gives raw scores and reuses the previous cycle's for
// unchanged nodes); a policy whose batch fails is asked node by node in
// Score, where the failure policy applies.
func (c *Cycle) PreScore(ctx context.Context, nodes []fwk.NodeInfo) bool {
	if !c.startScoring(nodes) {
		return false
	}
	c.scoreAll(ctx, nodes)
	return true
}

// scoreAll is PreScore's batch: every scoring policy scores every node.
func (c *Cycle) scoreAll(ctx context.Context, nodes []fwk.NodeInfo) {
	c.scoreOrder = scoredNodes{names: make([]string, len(nodes))}
	c.Names.fill(c.scoreOrder.names, nodes)
	for _, e := range c.Entries {
		if !e.scoring {
			continue
		}
		e.scores = make([]int64, len(nodes))
		start := time.Now()
		res, err := e.Version.ScoreAllMemo(ctx, c.Policy, nodes)
		if err != nil {
			c.retry(ctx, e, abiv1.Point_POINT_SCORE, err)
			continue
		}
		if res.Bad >= 0 {
			continue // Score meets the verdict node by node
		}
		e.called(abiv1.Point_POINT_SCORE, start, len(nodes), policy.Status{Code: abiv1.Code_CODE_SUCCESS}, nil)
		copy(e.scores, res.Values)
		e.scored, e.normalized = true, res.Normalized
		if res.Normalized && e.Version.Implements(abiv1.Point_POINT_NORMALIZE_SCORE) && e.Observer != nil {
			e.Observer.Called(Call{Point: abiv1.Point_POINT_NORMALIZE_SCORE, Calls: 1, Status: policy.Status{Code: abiv1.Code_CODE_SUCCESS}})
		}
	}
}

// startScoring forgets what the entries scored before, marks the ones that
// score and reports whether any does; direct is the only one, when there
// is one and nothing compares its scores (a shadow's AfterScore reads every
// node's).
func (c *Cycle) startScoring(nodes []fwk.NodeInfo) bool {
	c.direct, c.rescore, c.rawScorer = nil, false, nil
	n := 0
	for _, e := range c.Entries {
		e.scores, e.scored, e.normalized = nil, false, false
		if e.scoring = e.implements(abiv1.Point_POINT_SCORE); e.scoring {
			n++
			c.direct = e
		}
	}
	if n != 1 || c.direct.AfterScore != nil {
		c.direct = nil
	}
	c.scored = nodes
	return n > 0
}

// Rescore is PreScore for the scheduler's batch rescore (Kubernetes 1.37's
// opportunistic batching): nodes are the candidates of an earlier cycle of
// a pod with the same signature, whose raw scores the scheduler kept, and
// the node that cycle chose, which it asks Score about again. reuse is the
// version that gave the kept raw scores (RawScorer of that cycle; nil if
// none did). When it is still the composition's only scoring policy,
// nothing is scored here: ScoreRaw asks the policy about the nodes it is
// called for, and NormalizeRaw takes the other raw scores from the
// scheduler. Otherwise it is PreScore: every node scored again.
func (c *Cycle) Rescore(ctx context.Context, nodes []fwk.NodeInfo, reuse *policy.Policy) bool {
	if reuse == nil {
		return c.PreScore(ctx, nodes)
	}
	if !c.startScoring(nodes) {
		return false
	}
	if c.direct == nil || c.direct.Version != reuse {
		c.scoreAll(ctx, nodes)
		return true
	}
	c.rescore = true
	c.scoreOrder = scoredNodes{}
	return true
}

// Score records the raw scores of ni from the policies PreScore could not
// score in one batch. A failure under failurePolicy Fail fails the cycle
// (an Error status). Safe for concurrent use on distinct nodes.
func (c *Cycle) Score(ctx context.Context, ni fwk.NodeInfo) *Status {
	_, s := c.ScoreRaw(ctx, ni)
	return s
}

// ScoreRaw is Score that also returns the raw score of ni from the
// composition's only scoring policy: 0 when there is not exactly one, or
// when its batch normalised its scores already. The scheduler keeps the
// value with the node's other raw scores and hands it back to a later
// rescore's NormalizeRaw (Rescore).
func (c *Cycle) ScoreRaw(ctx context.Context, ni fwk.NodeInfo) (int64, *Status) {
	if c.rescore {
		e := c.direct
		if !e.implements(abiv1.Point_POINT_SCORE) {
			return 0, nil // ignored since
		}
		v, err := c.scoreNode(ctx, e, ni)
		if err != nil {
			return 0, c.fail(ctx, e, abiv1.Point_POINT_SCORE, err)
		}
		return v, nil
	}
	i := -1
	var raw int64
	for _, e := range c.Entries {
		if !e.scoring || !e.implements(abiv1.Point_POINT_SCORE) || (e.scored && e != c.direct) {
			continue
		}
		if i < 0 {
			var ok bool
			if i, ok = c.scoreOrder.index(-1, ni.Node().Name); !ok {
				return 0, &Status{Code: abiv1.Code_CODE_ERROR, Reasons: []string{fmt.Sprintf("%s: node %s was not passed to PreScore", Name, ni.Node().Name)}}
			}
		}
		if e.scored {
			if !e.normalized {
				raw = e.scores[i]
			}
			continue
		}
		v, err := c.scoreNode(ctx, e, ni)
		if err != nil {
			if fs := c.fail(ctx, e, abiv1.Point_POINT_SCORE, err); fs != nil {
				return 0, fs
			}
			continue
		}
		e.scores[i] = v
		if e == c.direct {
			raw = v
		}
	}
	return raw, nil
}

// scoreNode asks e's policy for its raw score of ni alone.
func (c *Cycle) scoreNode(ctx context.Context, e *Entry, ni fwk.NodeInfo) (int64, error) {
	start := time.Now()
	v, s, err := e.Version.Score(ctx, c.Policy, ni)
	e.called(abiv1.Point_POINT_SCORE, start, 1, s, err)
	if err == nil {
		err = mustSucceed(e, abiv1.Point_POINT_SCORE, s)
	}
	return v, err
}

// NormalizeScore normalises each policy's scores of the named nodes
// (PreScore's, in any order; through the guest when it exports
// NormalizeScore and did not normalise in PreScore's batch) and combines
// them: the weighted sum divided by the total weight, so the result stays
// in 0..100. A score outside 0..100 is the policy's failure. It returns
// the combined score of each named node; all 0 when no policy scored.
func (c *Cycle) NormalizeScore(ctx context.Context, names []string) ([]int64, *Status) {
	return c.NormalizeRaw(ctx, names, nil)
}

// NormalizeRaw is NormalizeScore given the raw scores the scheduler holds
// for the named nodes (what ScoreRaw returned for each, in this cycle or
// in the one whose scores a rescore reuses); only a cycle that Rescore
// left to the scheduler's scores reads them.
func (c *Cycle) NormalizeRaw(ctx context.Context, names []string, raws []int64) ([]int64, *Status) {
	totals := make([]int64, len(names))
	var weights int64
	// at[k] is the index into PreScore's nodes of names[k].
	var at []int
	positions := func() *Status {
		if at != nil {
			return nil
		}
		if c.scoreOrder.names == nil {
			c.scoreOrder = scoredNodes{names: make([]string, len(c.scored))}
			c.Names.fill(c.scoreOrder.names, c.scored)
		}
		at = make([]int, len(names))
		for k, name := range names {
			i, ok := c.scoreOrder.index(k, name)
			if !ok {
				return &Status{Code: abiv1.Code_CODE_ERROR, Reasons: []string{fmt.Sprintf("%s: node %s was not passed to PreScore", Name, name)}}
			}
			at[k] = i
		}
		return nil
	}
	counted := false
	for _, e := range c.Entries {
		if !e.scoring || !e.implements(abiv1.Point_POINT_SCORE) {
			continue
		}
		ps := make([]policy.NodeScore, len(names))
		if c.rescore {
			if len(raws) != len(names) {
				return nil, &Status{Code: abiv1.Code_CODE_ERROR, Reasons: []string{fmt.Sprintf("%s: %d raw scores for %d nodes", Name, len(raws), len(names))}}
			}
			for k, name := range names {
				ps[k] = policy.NodeScore{Name: name, Score: raws[k]}
			}
		} else {
			if s := positions(); s != nil {
				return nil, s
			}
			for k, name := range names {
				ps[k] = policy.NodeScore{Name: name, Score: e.scores[at[k]]}
			}
		}
		// The final scores come from the guest's NormalizeScore when it has
		// one (run here, or already in PreScore's batch).
		// A guest that flagged the cycle's raw scores final is not asked.
		guestNormalizes := e.Version.Implements(abiv1.Point_POINT_NORMALIZE_SCORE) && !e.Version.ScoresFinal(c.Policy)
		call := "score"
		if guestNormalizes {
			call = "normalize_score"
		}
		var infos []fwk.NodeInfo
		if (guestNormalizes && !e.normalized) || e.AfterScore != nil {
			if s := positions(); s != nil {
				return nil, s
			}
			infos = make([]fwk.NodeInfo, len(names))
			for k := range names {
				infos[k] = c.scored[at[k]]
			}
		}
		if guestNormalizes && !e.normalized {
			start := time.Now()
			s, err := e.Version.NormalizeScore(ctx, c.Policy, infos, ps)
			e.called(abiv1.Point_POINT_NORMALIZE_SCORE, start, 1, s, err)
			if err == nil {
				err = mustSucceed(e, abiv1.Point_POINT_NORMALIZE_SCORE, s)
			}
			if err != nil {
				if fs := c.fail(ctx, e, abiv1.Point_POINT_NORMALIZE_SCORE, err); fs != nil {
					return nil, fs
				}
				continue
			}
		}
		if err := inRange(e, call, ps); err != nil {
			if fs := c.fail(ctx, e, abiv1.Point_POINT_SCORE, err); fs != nil {
				return nil, fs
			}
			continue // left out: this policy does not count for this pod
		}
		if e.AfterScore != nil {
			e.AfterScore(ctx, c, infos, ps)
		}
		for k, s := range ps {
			totals[k] += e.Weight * s.Score
		}
		weights += e.Weight
		counted = counted || (e == c.direct && !e.normalized)
	}
	if counted {
		c.rawScorer = c.direct.Version
	}
	if weights > 0 {
		for k := range totals {
			totals[k] /= weights
		}
	}
	return totals, nil
}

// NormalizeList is NormalizeRaw on the scheduler's list: scores holds the
// raw scores ScoreRaw returned (or the scheduler kept, in a rescore) and
// gets the combined ones. A rescore whose policy's raw scores are final
// (it has no NormalizeScore, or flagged them so for the pod) only checks
// their range, in place: the combined score of one policy is its own.
func (c *Cycle) NormalizeList(ctx context.Context, scores fwk.NodeScoreList) *Status {
	if e := c.direct; c.rescore && e.implements(abiv1.Point_POINT_SCORE) &&
		(!e.Version.Implements(abiv1.Point_POINT_NORMALIZE_SCORE) || e.Version.ScoresFinal(c.Policy)) {
		for _, ns := range scores {
			if err := outOfRange(e, "score", ns.Name, ns.Score); err != nil {
				if fs := c.fail(ctx, e, abiv1.Point_POINT_SCORE, err); fs != nil {
					return fs
				}
				for k := range scores {
					scores[k].Score = 0 // left out: no policy counts
				}
				return nil
			}
		}
		c.rawScorer = e.Version
		return nil
	}
	names := make([]string, len(scores))
	raws := make([]int64, len(scores))
	for k, ns := range scores {
		names[k], raws[k] = ns.Name, ns.Score
	}
	totals, st := c.NormalizeRaw(ctx, names, raws)
	if st != nil {
		return st
	}
	for k := range scores {
		scores[k].Score = totals[k]
	}
	return nil
}

// RawScorer is the version whose raw scores ScoreRaw gave the scheduler
// for every node NormalizeRaw then normalised, with nothing else counting:
// a later Rescore may leave those scores to the scheduler. nil when
// another policy scored too, the batch normalised, or the policy failed.
func (c *Cycle) RawScorer() *policy.Policy { return c.rawScorer }

// ScoreAlone is what m's policy alone makes of nodes in this cycle: its
// final scores, in the order of nodes, from the calls the composition makes
// for a member (one ScoreAll batch, the composition's PreScore; node by node
// when the batch did not succeed; then the guest's NormalizeScore unless the
// batch normalised), checked in range. No failure policy applies: the first
// failure is returned, as a *engine.CallError, and nothing else is left
// out. Calls and the batch's failure are reported to m.Observer. It is for
// policies that score beside the composition without counting in it (a
// shadow); it leaves the cycle's own scores alone. Call it from one
// goroutine per member at a time.
func (c *Cycle) ScoreAlone(ctx context.Context, m Member, nodes []fwk.NodeInfo) ([]policy.NodeScore, error) {
	e := &Entry{Member: m}
	ps := make([]policy.NodeScore, len(nodes))
	for i, ni := range nodes {
		ps[i].Name = ni.Node().Name
	}
	start := time.Now()
	res, err := e.Version.ScoreAll(ctx, c.Policy, nodes)
	switch {
	case err != nil:
		c.retry(ctx, e, abiv1.Point_POINT_SCORE, err)
	case res.Bad < 0:
		e.called(abiv1.Point_POINT_SCORE, start, len(nodes), policy.Status{Code: abiv1.Code_CODE_SUCCESS}, nil)
		for i, v := range res.Values {
			ps[i].Score = v
		}
	}
	if err != nil || res.Bad >= 0 {
		for i, ni := range nodes {
			start := time.Now()
			v, s, err := e.Version.Score(ctx, c.Policy, ni)
			e.called(abiv1.Point_POINT_SCORE, start, 1, s, err)
			if err == nil {
				err = mustSucceed(e, abiv1.Point_POINT_SCORE, s)
			}
			if err != nil {
				return nil, e.callError(abiv1.Point_POINT_SCORE, err)
			}
			ps[i].Score = v
		}
		res.Normalized = false
	}
	call := "score"
	if e.Version.Implements(abiv1.Point_POINT_NORMALIZE_SCORE) {
		call = "normalize_score"
		if res.Normalized && e.Observer != nil {
			e.Observer.Called(Call{Point: abiv1.Point_POINT_NORMALIZE_SCORE, Calls: 1, Status: policy.Status{Code: abiv1.Code_CODE_SUCCESS}})
		} else if !res.Normalized {
			start := time.Now()
			s, err := e.Version.NormalizeScore(ctx, c.Policy, nodes, ps)
			e.called(abiv1.Point_POINT_NORMALIZE_SCORE, start, 1, s, err)
			if err == nil {
				err = mustSucceed(e, abiv1.Point_POINT_NORMALIZE_SCORE, s)
			}
			if err != nil {
				return nil, e.callError(abiv1.Point_POINT_NORMALIZE_SCORE, err)
			}
		}
	}
	if err := inRange(e, call, ps); err != nil {
		return nil, err
	}
	return ps, nil
}

// inRange checks a policy's final scores; call is the guest call that gave
// them.
func inRange(e *Entry, call string, ps []policy.NodeScore) error {
	for _, s := range ps {
		if err := outOfRange(e, call, s.Name, s.Score); err != nil {
			return err
		}
	}
	return nil
}

// outOfRange is the error for a final score outside 0..100, or nil.
func outOfRange(e *Entry, call, node string, score int64) error {
	if score < fwk.MinNodeScore || score > fwk.MaxNodeScore {
		return e.Version.CallError(call, engine.KindInvalid,
			fmt.Errorf("%d for node %s is outside %d..%d", score, node, fwk.MinNodeScore, fwk.MaxNodeScore))
	}
	return nil
}

// scoredNodes are the names of the nodes PreScore was given, in order. The
// framework passes Score one of them at a time and NormalizeScore all of
// them, in the same order; index finds a node's position from its name.
type scoredNodes struct {
	names  []string
	once   sync.Once
	byName map[string]int // built on the first lookup that the order does not answer
}

// index returns the position of the named node among PreScore's nodes; k is
// where it is expected (-1: anywhere).
func (sn *scoredNodes) index(k int, name string) (int, bool) {
	if k >= 0 && k < len(sn.names) && sn.names[k] == name {
		return k, true
	}
	sn.once.Do(func() {
		sn.byName = make(map[string]int, len(sn.names))
		for i, n := range sn.names {
			sn.byName[n] = i
		}
	})
	i, ok := sn.byName[name]
	return i, ok
}

// NodeNames remembers the names of the nodes PreScore was given last, by
// position (policy.NodeSlots): most names come without reading the node,
// and each is the very string the framework hands NormalizeScore, so
// checking the order there compares addresses. One per scheduling profile (Cycle.Names); safe
// for concurrent use.
type NodeNames struct {
	mu    sync.Mutex
	slots policy.NodeSlots[string]
}

func nodeName(n *v1.Node) string { return n.Name }

// fill sets names[i] to the name of nodes[i]; nn may be nil.
func (nn *NodeNames) fill(names []string, nodes []fwk.NodeInfo) {
	if nn == nil {
		for i, ni := range nodes {
			names[i] = nodeName(ni.Node())
		}
		return
	}
	nn.mu.Lock()
	defer nn.mu.Unlock()
	for i, ni := range nodes {
		names[i] = nn.slots.At(i, ni.Node(), nodeName)
	}
}
