package compose

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/policy"
)

// ranked are nodes named a, b, c... labelled rank=<ranks[i]>.
func ranked(ranks ...int) []fwk.NodeInfo {
	var out []fwk.NodeInfo
	for i, r := range ranks {
		ni := framework.NewNodeInfo()
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: string(rune('a' + i)), Labels: map[string]string{"rank": fmt.Sprint(r)}}})
		out = append(out, ni)
	}
	return out
}

func scoresOf(ps []policy.NodeScore) string { return fmt.Sprint(ps) }

// TestScoreAlone: a policy scored beside the composition gets the final
// scores the composition would give it (raw, normalised by the guest, from
// a batch or node by node), its failure is returned with its kind and
// call, and the cycle's own scores are left alone.
func TestScoreAlone(t *testing.T) {
	ctx := context.Background()
	ns := ranked(1, 5, 3)
	for _, tc := range []struct {
		settings string
		want     string
		kind     engine.Kind
		call     string
	}{
		{`{"scoreLabel": "rank"}`, "[{a 1} {b 5} {c 3}]", "", ""},
		{`{"scoreLabel": "rank", "normalize": true}`, "[{a 0} {b 100} {c 50}]", "", ""},
		{`{"scoreLabel": "kubernetes.io/hostname"}`, "", engine.KindGuest, "score"},
		{`{"at": "score", "how": "outofrange"}`, "", engine.KindInvalid, "score"},
		{`{"at": "normalize", "how": "panic"}`, "", engine.KindTrap, "normalize_score"},
	} {
		enf, _ := probe(t, "enforcing", `{"scoreLabel": "rank"}`, false)
		m, r := probe(t, "alone", tc.settings, false)
		c := NewCycle(pod, ns, []Member{enf})
		c.PreScore(ctx, ns)
		got, err := c.ScoreAlone(ctx, m, ns)
		if tc.kind == "" {
			if err != nil || scoresOf(got) != tc.want {
				t.Fatalf("%s: %v, %v; want %s", tc.settings, got, err, tc.want)
			}
			if r.calls[abiv1.Point_POINT_SCORE] != len(ns) {
				t.Fatalf("%s: observer told of %d Score calls, want %d", tc.settings, r.calls[abiv1.Point_POINT_SCORE], len(ns))
			}
		} else {
			ce, ok := err.(*engine.CallError)
			if !ok || ce.Kind != tc.kind || ce.Call != tc.call || got != nil {
				t.Fatalf("%s: %v, %v; want a failure of kind %s in %s", tc.settings, got, err, tc.kind, tc.call)
			}
		}
		totals, s := c.NormalizeScore(ctx, []string{"a", "b", "c"})
		if s != nil || fmt.Sprint(totals) != "[1 5 3]" {
			t.Fatalf("%s: the cycle's own scores became %v, %+v; want [1 5 3]", tc.settings, totals, s)
		}
	}
}

// TestAfterScore: the hook gets the member's final scores with their nodes,
// in NormalizeScore's order, once per cycle; not when the member's scores
// do not count (it failed under Ignore).
func TestAfterScore(t *testing.T) {
	ctx := context.Background()
	ns := ranked(1, 5, 3)
	m, _ := probe(t, "s", `{"scoreLabel": "rank", "normalize": true}`, false)
	var calls int
	var got []policy.NodeScore
	var order []string
	m.AfterScore = func(_ context.Context, _ *Cycle, nodes []fwk.NodeInfo, scores []policy.NodeScore) {
		calls++
		got = append([]policy.NodeScore(nil), scores...)
		order = nil
		for _, ni := range nodes {
			order = append(order, ni.Node().Name)
		}
	}
	c := NewCycle(pod, ns, []Member{m})
	c.PreScore(ctx, ns)
	if _, s := c.NormalizeScore(ctx, []string{"c", "a", "b"}); s != nil {
		t.Fatal(s)
	}
	if calls != 1 || scoresOf(got) != "[{c 50} {a 0} {b 100}]" || fmt.Sprint(order) != "[c a b]" {
		t.Fatalf("AfterScore called %d times with %v on %v; want once with [{c 50} {a 0} {b 100}] on [c a b]", calls, got, order)
	}

	bad, _ := probe(t, "bad", `{"at": "score", "how": "panic"}`, true)
	bad.AfterScore = m.AfterScore
	calls = 0
	c = NewCycle(pod, ns, []Member{bad})
	c.PreScore(ctx, ns)
	for _, ni := range ns {
		c.Score(ctx, ni)
	}
	c.NormalizeScore(ctx, []string{"a", "b", "c"})
	if calls != 0 {
		t.Fatalf("AfterScore called %d times for a policy left out; want none", calls)
	}
}

// TestAfterPermit: the hook sees each member's Permit answer, a failure
// included, and whatever it does the composition decides as before.
func TestAfterPermit(t *testing.T) {
	ctx := context.Background()
	ns := ranked(1)
	type seen struct {
		policy string
		code   abiv1.Code
		err    bool
	}
	var log []seen
	hook := func(name string) func(context.Context, *Cycle, fwk.NodeInfo, []*abiv1.WaitingPod, policy.PermitResult, error) {
		return func(_ context.Context, _ *Cycle, ni fwk.NodeInfo, _ []*abiv1.WaitingPod, res policy.PermitResult, err error) {
			log = append(log, seen{name, res.Status.Code, err != nil})
		}
	}
	bad, _ := probe(t, "bad", `{"at": "permit", "how": "panic"}`, true)
	bad.AfterPermit = hook("bad")
	wait, _ := probe(t, "wait", `{"permit": "wait"}`, false)
	wait.AfterPermit = hook("wait")
	c := NewCycle(pod, ns, []Member{bad, wait})
	res := c.Permit(ctx, ns[0], nil)
	if res.Status == nil || res.Status.Code != abiv1.Code_CODE_WAIT || len(res.WaitFor) != 1 {
		t.Fatalf("Permit = %+v, want Wait for wait alone", res)
	}
	if fmt.Sprint(log) != fmt.Sprint([]seen{{"bad", 0, true}, {"wait", abiv1.Code_CODE_WAIT, false}}) {
		t.Fatalf("AfterPermit saw %v", log)
	}
}
