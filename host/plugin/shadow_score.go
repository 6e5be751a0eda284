package plugin

import (
	"context"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"

	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/compose"
	"github.com/wasmsched/wasmsched/host/policy"
)

// compareScores has the shadow score the nodes the enforcing policy scored,
// once per cycle (a compose.Member's AfterScore), and records whether the
// two would place the pod on the same node: each one's best node, the
// highest of its final (normalised) scores, ties going to the first node
// name. The shadow scores the way the composition scores a member
// (compose.Cycle.ScoreAlone); its failure is a disagreement, counted and
// logged, and never reaches the pod.
//
// It runs in NormalizeScore, on the scheduler's goroutine: the snapshot's
// nodes may not be read after the scheduling cycle, so the shadow's
// scoring adds to the cycle's latency, as its Filter does.
func (r *shadowRun) compareScores(ctx context.Context, c *compose.Cycle, nodes []fwk.NodeInfo, enforced []policy.NodeScore) {
	sh := r.version
	if !sh.Implements(abiv1.Point_POINT_SCORE) || len(enforced) == 0 {
		return
	}
	got, err := c.ScoreAlone(ctx, compose.Member{Name: r.shadow.name(), Version: sh, Observer: r.shadow}, nodes)
	if err != nil && ctx.Err() != nil {
		return // the scheduler abandoned the cycle: nothing to compare
	}
	labels := r.labels("score")
	shadowComparisons.WithLabelValues(labels...).Inc()
	want := enforced[best(enforced)]
	log := klog.FromContext(ctx).WithName(Name)
	if err != nil {
		r.failed(ctx, c.Pod(), abiv1.Point_POINT_SCORE, err)
		shadowDisagreements.WithLabelValues(labels...).Inc()
		log.Info("Shadow policy disagrees", "policy", r.enforcing.Name, "shadow", r.shadow.name(), "pod", klog.KObj(c.Pod()), "point", "score",
			"enforcedNode", want.Name, "enforcedScore", want.Score, "shadowVerdict", verdict(policy.Status{}, err),
			"enforcedDigest", api.ShortDigest(r.enforcing.Version.Digest()), "shadowDigest", api.ShortDigest(sh.Digest()))
		return
	}
	top := got[best(got)]
	if top.Name == want.Name {
		return
	}
	shadowDisagreements.WithLabelValues(labels...).Inc()
	log.Info("Shadow policy disagrees", "policy", r.enforcing.Name, "shadow", r.shadow.name(), "pod", klog.KObj(c.Pod()), "point", "score",
		"enforcedNode", want.Name, "enforcedScore", want.Score, "shadowNode", top.Name, "shadowScore", top.Score,
		"shadowRankOfEnforced", ahead(got, want.Name),
		"enforcedDigest", api.ShortDigest(r.enforcing.Version.Digest()), "shadowDigest", api.ShortDigest(sh.Digest()))
}

// best is the index of the best of scores: the highest score, ties going to
// the first node name. scores is not empty.
func best(scores []policy.NodeScore) int {
	b := 0
	for i, s := range scores[1:] {
		if before(s, scores[b]) {
			b = i + 1
		}
	}
	return b
}

// ahead is how many of scores rank before the named node: 0 when it is the
// best, len(scores) when it is not among them.
func ahead(scores []policy.NodeScore, name string) int {
	for _, s := range scores {
		if s.Name == name {
			n := 0
			for _, o := range scores {
				if before(o, s) {
					n++
				}
			}
			return n
		}
	}
	return len(scores)
}

// before reports whether a ranks before b: a higher score, or the same
// score and a name first in order.
func before(a, b policy.NodeScore) bool {
	return a.Score > b.Score || (a.Score == b.Score && a.Name < b.Name)
}
