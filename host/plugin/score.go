package plugin

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// PreScore scores every node in one batch per policy, or skips scoring when
// no policy scores.
func (pl *Plugin) PreScore(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	st, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if !st.c.PreScore(ctx, nodes) {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

// Score records the raw scores of the node from the policies PreScore could
// not score in one batch; the combined score is computed in NormalizeScore.
// A policy failure under failurePolicy Fail fails the cycle.
func (pl *Plugin) Score(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	st, err := getState(cs)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	return 0, toStatus(st.c.Score(ctx, ni))
}

// ScoreExtensions implements fwk.ScorePlugin.
func (pl *Plugin) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore normalises each policy's scores and combines them: the
// weighted sum divided by the total weight, so the result stays in 0..100
// and the plugin's own weight in the profile scales it against the other
// plugins.
func (pl *Plugin) NormalizeScore(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	st, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	names := make([]string, len(scores))
	for k, ns := range scores {
		names[k] = ns.Name
	}
	totals, s := st.c.NormalizeScore(ctx, names)
	if s != nil {
		return toStatus(s)
	}
	for k := range scores {
		scores[k].Score = totals[k]
	}
	return nil
}
