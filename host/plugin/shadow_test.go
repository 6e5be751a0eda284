package plugin

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/wasmsched/wasmsched/host/lifecycle"
	"github.com/wasmsched/wasmsched/host/policy"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// shadowCounts are the shadow metrics of the enforcing policy sh-enf and
// its shadow sh-canary, and the shadow's failures.
type shadowCounts struct {
	compared, disagreed map[string]float64 // by point
	failed              map[string]float64 // by point, any kind
}

func readShadowCounts(t *testing.T) shadowCounts {
	t.Helper()
	c := shadowCounts{map[string]float64{}, map[string]float64{}, map[string]float64{}}
	for _, point := range []string{"filter", "score", "permit"} {
		var err error
		if c.compared[point], err = testutil.GetCounterMetricValue(shadowComparisons.WithLabelValues("sh-enf", "sh-canary", point)); err != nil {
			t.Fatal(err)
		}
		if c.disagreed[point], err = testutil.GetCounterMetricValue(shadowDisagreements.WithLabelValues("sh-enf", "sh-canary", point)); err != nil {
			t.Fatal(err)
		}
		for _, kind := range []string{"trap", "guest", "invalid"} {
			v, err := testutil.GetCounterMetricValue(errorsTotal.WithLabelValues("sh-canary", point, kind))
			if err != nil {
				t.Fatal(err)
			}
			c.failed[point] += v
		}
	}
	return c
}

// delta is what changed from before to c, as "point:compared/disagreed/failed".
func (c shadowCounts) delta(before shadowCounts) string {
	var out []string
	for _, point := range []string{"filter", "score", "permit"} {
		out = append(out, fmt.Sprintf("%s:%g/%g/%g", point, c.compared[point]-before.compared[point],
			c.disagreed[point]-before.disagreed[point], c.failed[point]-before.failed[point]))
	}
	return fmt.Sprint(out)
}

// TestShadowComparesScoreAndPermit runs one pod's cycle through the plugin
// with the probe as enforcing policy (scores by label rank, allows at
// Permit) and as its shadow, set to agree, to prefer another node, to wait,
// to reject or to fail. The pod's scores and Permit verdict are the
// enforcing policy's every time; each comparison and disagreement is
// counted once per cycle at score and permit (per node at filter), and the
// shadow's failures are counted as its errors. The framework's own Permit
// (waiting pods, wait sets) needs a Handle; the cycle's Permit is what the
// shadow hooks into.
func TestShadowComparesScoreAndPermit(t *testing.T) {
	// The counters count once registered, which New does; this test
	// builds the plugin's parts without it.
	registerMetrics()
	ctx := context.Background()
	probe := testwasm.Bytes(t, "test/guests/probe")
	load := func(name, settings string) *policy.Policy {
		p, err := policy.Load(ctx, policy.Options{Name: name, Wasm: probe, Settings: []byte(settings), MaxInstances: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close(context.Background()) })
		return p
	}
	// a is the enforcing policy's best node, b the contrary shadow's.
	var nodes []fwk.NodeInfo
	for _, n := range []struct{ name, rank, contrary string }{{"a", "10", "1"}, {"b", "1", "10"}, {"c", "5", "5"}} {
		ni := framework.NewNodeInfo()
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{"rank": n.rank, "contrary": n.contrary}}})
		nodes = append(nodes, ni)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"}}
	enforcing := load("sh-enf", `{"scoreLabel": "rank", "normalize": true}`)

	for _, tc := range []struct {
		name, settings string
		want           string
	}{
		{"agrees", `{"scoreLabel": "rank"}`, "[filter:3/0/0 score:1/0/0 permit:1/0/0]"},
		{"prefers b, waits", `{"scoreLabel": "contrary", "normalize": true, "permit": "wait"}`, "[filter:3/0/0 score:1/1/0 permit:1/1/0]"},
		{"rejects", `{"scoreLabel": "rank", "permit": "reject"}`, "[filter:3/0/0 score:1/0/0 permit:1/1/0]"},
		{"ties", `{}`, "[filter:3/0/0 score:1/0/0 permit:1/0/0]"}, // all 0: a by name
		// Two failures: the batch's, then the first node's alone, as an
		// enforcing policy's are counted.
		{"fails at score", `{"at": "score", "how": "panic"}`, "[filter:3/0/0 score:1/1/2 permit:1/0/0]"},
		{"fails at permit", `{"scoreLabel": "rank", "at": "permit", "how": "panic"}`, "[filter:3/0/0 score:1/0/0 permit:1/1/1]"},
		{"fails at filter", `{"at": "filter", "how": "panic", "scoreLabel": "rank"}`, "[filter:3/3/3 score:1/0/0 permit:1/0/0]"},
		{"rejects at filter", `{"rejectLabel": "contrary", "scoreLabel": "rank"}`, "[filter:3/3/0 score:1/0/0 permit:1/0/0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enf := lifecycle.NewFixedSlot(lifecycle.PolicyArgs{Name: "sh-enf"}, enforcing)
			sh := lifecycle.NewFixedSlot(lifecycle.PolicyArgs{Name: "sh-canary", Mode: lifecycle.ModeShadow, Shadows: "sh-enf"}, load("sh-canary", tc.settings))
			pl := fixedPlugin(enf, sh)
			before := readShadowCounts(t)

			cs := framework.NewCycleState()
			if _, s := pl.PreFilter(ctx, cs, pod, nodes); !s.IsSuccess() {
				t.Fatalf("PreFilter: %v", s)
			}
			for _, ni := range nodes {
				if s := pl.Filter(ctx, cs, pod, ni); !s.IsSuccess() {
					t.Fatalf("Filter %s: %v", ni.Node().Name, s)
				}
			}
			if s := pl.PreScore(ctx, cs, pod, nodes); !s.IsSuccess() {
				t.Fatalf("PreScore: %v", s)
			}
			scores := fwk.NodeScoreList{{Name: "a"}, {Name: "b"}, {Name: "c"}}
			for _, ni := range nodes {
				if _, s := pl.Score(ctx, cs, pod, ni); !s.IsSuccess() {
					t.Fatalf("Score %s: %v", ni.Node().Name, s)
				}
			}
			if s := pl.NormalizeScore(ctx, cs, pod, scores); !s.IsSuccess() {
				t.Fatalf("NormalizeScore: %v", s)
			}
			if got := fmt.Sprint(scores); got != "[{a 100} {b 0} {c 44}]" {
				t.Fatalf("scores %s, want the enforcing policy's [{a 100} {b 0} {c 44}]", got)
			}
			// Permit as the plugin runs it, without the framework's
			// waiting pods: the enforcing policy allows.
			st, err := getState(cs)
			if err != nil {
				t.Fatal(err)
			}
			if res := st.c.Permit(ctx, nodes[0], nil); res.Status != nil || res.Wait != 0 || len(res.WaitFor) != 0 {
				t.Fatalf("Permit = %+v, want the enforcing policy's allow", res)
			}
			if got := readShadowCounts(t).delta(before); got != tc.want {
				t.Fatalf("compared/disagreed/failed %s, want %s", got, tc.want)
			}
		})
	}
}

// Without a shadow the enforcing member has no hooks: the points cost
// nothing extra.
func TestNoShadowNoHooks(t *testing.T) {
	p, err := policy.Load(context.Background(), policy.Options{Name: "alone", Wasm: testwasm.Bytes(t, "test/guests/probe"), Settings: []byte(`{}`), MaxInstances: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	s := lifecycle.NewFixedSlot(lifecycle.PolicyArgs{Name: "alone"}, p)
	pl := fixedPlugin(s)
	e := pl.newCycle(&v1.Pod{}, nil).c.Entries[0]
	if e.AfterFilter != nil || e.AfterScore != nil || e.AfterPermit != nil {
		t.Fatal("a policy without a shadow has comparison hooks")
	}
}

// TestBestNode: the best node is the highest score, ties to the first
// name; ahead counts the nodes ranked before one.
func TestBestNode(t *testing.T) {
	ps := []policy.NodeScore{{Name: "c", Score: 50}, {Name: "b", Score: 90}, {Name: "a", Score: 90}, {Name: "d", Score: 10}}
	if b := ps[best(ps)].Name; b != "a" {
		t.Fatalf("best %s, want a (90, before b by name)", b)
	}
	for name, want := range map[string]int{"a": 0, "b": 1, "c": 2, "d": 3, "missing": 4} {
		if got := ahead(ps, name); got != want {
			t.Errorf("ahead(%s) = %d, want %d", name, got, want)
		}
	}
}
