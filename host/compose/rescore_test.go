package compose

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/policy"
)

// scoredNode is a node whose label "score" the probe's scoreLabel reads.
func scoredNode(name, score string) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"score": score}}})
	return ni
}

// scoreCycle runs a cycle's scoring as the scheduler does: PreScore (or
// Rescore with reuse), Score on the nodes asked, NormalizeScore with the raw
// scores of those nodes from Score and of the others from kept. It returns
// the raw scores the scheduler would keep, the totals and how many nodes
// the policy was asked to score.
func scoreCycle(t *testing.T, c *Cycle, r *record, nodes []fwk.NodeInfo, asked []int, kept []int64, rescore bool, reuse *policy.Policy) (raws, totals []int64, calls int) {
	t.Helper()
	ctx := context.Background()
	if res := c.PreFilter(ctx); res.Status != nil {
		t.Fatalf("PreFilter: %+v", res.Status)
	}
	before := r.calls[abiv1.Point_POINT_SCORE]
	ok := c.PreScore
	if rescore {
		ok = func(ctx context.Context, nodes []fwk.NodeInfo) bool { return c.Rescore(ctx, nodes, reuse) }
	}
	if !ok(ctx, nodes) {
		t.Fatal("no policy scores")
	}
	raws = slices.Clone(kept)
	names := make([]string, len(nodes))
	for i, ni := range nodes {
		names[i] = ni.Node().Name
	}
	for _, i := range asked {
		v, s := c.ScoreRaw(ctx, nodes[i])
		if s != nil {
			t.Fatalf("Score(%s): %+v", names[i], s)
		}
		raws[i] = v
	}
	totals, s := c.NormalizeRaw(ctx, names, raws)
	if s != nil {
		t.Fatalf("NormalizeScore: %+v", s)
	}
	return raws, totals, r.calls[abiv1.Point_POINT_SCORE] - before
}

// TestRescoreLeavesKeptScores: in the scheduler's batch rescore, a cycle
// whose only scoring policy is the version that gave the kept raw scores
// asks the guest about the one node rescored and normalises it with the
// kept scores, to the totals a full cycle gives; anything else (no kept
// scores, another version, two scoring policies, scores the guest
// normalised in its batch) scores every node again, and the scores kept
// from it are not offered for reuse.
func TestRescoreLeavesKeptScores(t *testing.T) {
	const sig = `, "signature": {"annotationKeys": ["kind"]}`
	m, r := probe(t, "s", `{"scoreLabel": "score", "normalize": true`+sig+`}`, false)
	all := []int{0, 1, 2}
	ns := []fwk.NodeInfo{scoredNode("a", "10"), scoredNode("b", "20"), scoredNode("c", "30")}

	c := NewCycle(pod, ns, []Member{m})
	raws, totals, calls := scoreCycle(t, c, r, ns, all, make([]int64, 3), false, nil)
	if !slices.Equal(raws, []int64{10, 20, 30}) || !slices.Equal(totals, []int64{0, 50, 100}) || calls != 3 {
		t.Fatalf("full cycle: raw %v, totals %v, %d nodes scored; want [10 20 30], [0 50 100], 3", raws, totals, calls)
	}
	if c.RawScorer() != m.Version {
		t.Fatal("full cycle: its raw scores are not offered for reuse")
	}

	// The pod went to c, which now scores 5: the rescore asks about c alone.
	ns2 := []fwk.NodeInfo{ns[0], ns[1], scoredNode("c", "5")}
	c2 := NewCycle(pod, ns2, []Member{m})
	raws, totals, calls = scoreCycle(t, c2, r, ns2, []int{2}, raws, true, m.Version)
	if !slices.Equal(raws, []int64{10, 20, 5}) || !slices.Equal(totals, []int64{33, 100, 0}) || calls != 1 {
		t.Fatalf("rescore: raw %v, totals %v, %d nodes scored; want [10 20 5], [33 100 0], 1", raws, totals, calls)
	}
	// The same cycle scored in full gives the same totals.
	full := NewCycle(pod, ns2, []Member{m})
	if _, want, _ := scoreCycle(t, full, r, ns2, all, make([]int64, 3), false, nil); !slices.Equal(totals, want) {
		t.Fatalf("rescore totals %v, full cycle's %v", totals, want)
	}

	// Kept scores that are not reused: every node is scored again, and the
	// kept scores of the nodes not asked about (wrong on purpose) are not
	// read.
	other, or := probe(t, "s", `{"scoreLabel": "score", "normalize": true`+sig+`}`, false)
	unsigned, ur := probe(t, "s", `{"scoreLabel": "score", "normalize": true}`, false)
	second, _ := probe(t, "t", `{"scoreLabel": "score"`+sig+`}`, false)
	wrong := []int64{90, 90, 90}
	for _, tc := range []struct {
		name    string
		members []Member
		r       *record
		reuse   *policy.Policy
		raw     bool // the cycle's raw scores are offered for reuse
	}{
		{"no kept scores", []Member{m}, r, nil, true},
		{"another version", []Member{other}, or, m.Version, true},
		{"two scoring policies", []Member{m, second}, r, m.Version, false},
		{"normalised in the batch", []Member{unsigned}, ur, nil, false},
	} {
		c := NewCycle(pod, ns2, tc.members)
		_, totals, calls := scoreCycle(t, c, tc.r, ns2, []int{2}, wrong, true, tc.reuse)
		if calls != 3 {
			t.Errorf("%s: %d nodes scored, want 3", tc.name, calls)
		}
		if len(tc.members) == 1 && !slices.Equal(totals, []int64{33, 100, 0}) {
			t.Errorf("%s: totals %v, want [33 100 0]", tc.name, totals)
		}
		if got := c.RawScorer() != nil; got != tc.raw {
			t.Errorf("%s: raw scores offered for reuse %v, want %v", tc.name, got, tc.raw)
		}
	}
}

// TestRescoreFinalScoresInPlace: a rescore whose policy's raw scores are
// final (no NormalizeScore) leaves the scheduler's list as it is, after
// checking the range: a score outside 0..100 fails the cycle under Fail and
// leaves the policy out (every node 0) under Ignore.
func TestRescoreFinalScoresInPlace(t *testing.T) {
	ctx := context.Background()
	const settings = `{"scoreLabel": "score", "signature": {"annotationKeys": ["kind"]}}`
	ns := []fwk.NodeInfo{scoredNode("a", "10"), scoredNode("b", "20"), scoredNode("c", "30")}
	list := func(scores ...int64) fwk.NodeScoreList {
		l := make(fwk.NodeScoreList, len(scores))
		for i, s := range scores {
			l[i] = fwk.NodeScore{Name: ns[i].Node().Name, Score: s}
		}
		return l
	}
	for _, tc := range []struct {
		name   string
		ignore bool
		kept   int64 // a's kept raw score
		want   []int64
		fails  bool
	}{
		{"in range", false, 10, []int64{10, 20, 30}, false},
		{"out of range, Fail", false, 1000, nil, true},
		{"out of range, Ignore", true, 1000, []int64{0, 0, 0}, false},
	} {
		m, r := probe(t, "s", settings, tc.ignore)
		c := NewCycle(pod, ns, []Member{m})
		scoreCycle(t, c, r, ns, []int{0, 1, 2}, make([]int64, 3), false, nil)
		if c.RawScorer() != m.Version {
			t.Fatalf("%s: full cycle's raw scores not offered for reuse", tc.name)
		}
		c = NewCycle(pod, ns, []Member{m})
		c.PreFilter(ctx)
		if !c.Rescore(ctx, ns, m.Version) || !c.rescore {
			t.Fatalf("%s: the rescore scores every node", tc.name)
		}
		v, s := c.ScoreRaw(ctx, ns[2])
		if s != nil || v != 30 {
			t.Fatalf("%s: ScoreRaw(c) = %d, %+v; want 30", tc.name, v, s)
		}
		l := list(tc.kept, 20, v)
		s = c.NormalizeList(ctx, l)
		if tc.fails {
			if s == nil || s.Code != abiv1.Code_CODE_ERROR || s.Err == nil || s.Err.Kind != engine.KindInvalid {
				t.Fatalf("%s: %+v, want an Error of kind invalid", tc.name, s)
			}
			continue
		}
		got := []int64{l[0].Score, l[1].Score, l[2].Score}
		if s != nil || !slices.Equal(got, tc.want) {
			t.Fatalf("%s: %v, %+v; want %v", tc.name, got, s, tc.want)
		}
	}
}
