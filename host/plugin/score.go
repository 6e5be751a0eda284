package plugin

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// PreScore scores every node in one batch per policy, or skips scoring when
// no policy scores.
//
// On a clone of the cycle's state it is the batch rescore of Kubernetes
// 1.37's opportunistic batching (OpportunisticBatch.rescoreHintedNode, the
// only caller that scores on a clone): the scheduler asks Score about one
// node, the one the last pod was placed on, and normalises it together with
// the raw scores it kept from the cycle the batch started with. When those
// came from the version that scores now, alone, the plugin leaves them to
// the scheduler as a native plugin's are (compose.Cycle.Rescore) instead of
// scoring every candidate again.
func (pl *Plugin) PreScore(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	st, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	var scores bool
	if st.clone {
		scores = st.c.Rescore(ctx, nodes, pl.rawScorer.Load())
	} else {
		// The scheduler keeps this cycle's raw scores from now on.
		pl.rawScorer.Store(nil)
		scores = st.c.PreScore(ctx, nodes)
	}
	if !scores {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

// Score records the raw scores of the node from the policies PreScore could
// not score in one batch; the combined score is computed in NormalizeScore.
// It returns the raw score of the only scoring policy, if one alone scores
// (compose.Cycle.ScoreRaw), for the scheduler to keep. A policy failure
// under failurePolicy Fail fails the cycle.
func (pl *Plugin) Score(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	st, err := getState(cs)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	raw, s := st.c.ScoreRaw(ctx, ni)
	return raw, toStatus(s)
}

// ScoreExtensions implements fwk.ScorePlugin.
func (pl *Plugin) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore normalises each policy's scores and combines them: the
// weighted sum divided by the total weight, so the result stays in 0..100
// and the plugin's own weight in the profile scales it against the other
// plugins. scores holds the raw scores Score returned, which a rescore
// reads (compose.Cycle.NormalizeList).
func (pl *Plugin) NormalizeScore(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	st, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if s := st.c.NormalizeList(ctx, scores); s != nil {
		return toStatus(s)
	}
	if !st.clone {
		pl.rawScorer.Store(st.c.RawScorer())
	}
	return nil
}
