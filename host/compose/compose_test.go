package compose

import (
	"context"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/policy"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func TestMain(m *testing.M) { testwasm.Main(m) }

// record is an Observer that keeps what it is told.
type record struct {
	mu       sync.Mutex
	calls    map[abiv1.Point]int
	failures []failure
}

type failure struct {
	point   abiv1.Point
	kind    engine.Kind
	call    string
	outcome Outcome
}

func (r *record) Called(c Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[abiv1.Point]int{}
	}
	r.calls[c.Point] += c.Calls
}

func (r *record) Failed(_ context.Context, _ *v1.Pod, pt abiv1.Point, err *engine.CallError, o Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, failure{pt, err.Kind, err.Call, o})
}

// probe loads the probe test guest with settings, as a member named name.
func probe(t *testing.T, name, settings string, ignore bool) (Member, *record) {
	t.Helper()
	p, err := policy.Load(context.Background(), policy.Options{Name: name, Wasm: testwasm.Bytes(t, "test/guests/probe"), Settings: []byte(settings), MaxInstances: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	r := &record{}
	return Member{Name: name, Version: p, Ignore: ignore, Observer: r}, r
}

func nodes(names ...string) []fwk.NodeInfo {
	var out []fwk.NodeInfo
	for _, n := range names {
		ni := framework.NewNodeInfo()
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/hostname": n}}})
		out = append(out, ni)
	}
	return out
}

var pod = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"}}

// TestFilterFailurePolicies: under Fail a failing Filter is every node's
// Unschedulable verdict naming the policy; under Ignore the first failure
// leaves the policy out of the cycle (once, counted as Skip) and the other
// policies decide alone.
func TestFilterFailurePolicies(t *testing.T) {
	ctx := context.Background()
	ns := nodes("a", "b", "c")

	failing, fr := probe(t, "bad", `{"at": "filter", "how": "panic"}`, false)
	c := NewCycle(pod, ns, []Member{failing})
	if res := c.PreFilter(ctx); res.Status != nil || res.Skip {
		t.Fatalf("PreFilter: %+v", res)
	}
	for _, ni := range ns {
		s, e := c.Filter(ctx, ni)
		if s == nil || s.Code != abiv1.Code_CODE_UNSCHEDULABLE || e == nil || e.Name != "bad" || s.Err == nil || s.Err.Kind != engine.KindTrap ||
			len(s.Reasons) != 1 || !strings.HasPrefix(s.Reasons[0], "bad: policy failed (failurePolicy Fail): policy bad@") {
			t.Fatalf("Filter(%s) = %+v, want Unschedulable naming bad", ni.Node().Name, s)
		}
	}
	// The batch failed (Retry), then each node failed (Fail).
	if got := outcomes(fr); got != "retry fail fail fail" {
		t.Fatalf("outcomes %q, want retry fail fail fail", got)
	}

	ignored, ir := probe(t, "bad", `{"at": "filter", "how": "panic"}`, true)
	other, _ := probe(t, "other", `{"rejectLabel": "kubernetes.io/hostname"}`, false)
	c = NewCycle(pod, ns, []Member{ignored, other})
	c.PreFilter(ctx)
	for _, ni := range ns {
		s, _ := c.Filter(ctx, ni)
		if s == nil || s.Policy != "other" || s.Code != abiv1.Code_CODE_UNSCHEDULABLE {
			t.Fatalf("Filter(%s) = %+v, want other's rejection", ni.Node().Name, s)
		}
	}
	if got := outcomes(ir); got != "retry skip" {
		t.Fatalf("outcomes %q, want retry skip: left out after the first failure", got)
	}
	if !c.Entries[0].Ignored() {
		t.Fatal("the ignored policy is not marked left out")
	}
}

// TestScoreFailures: a Score failure under Fail fails the cycle (Error),
// with the kind saying whose fault it is: the guest's own Error (guest), a
// score out of range (invalid); under Ignore the policy is left out and
// the others' scores decide.
func TestScoreFailures(t *testing.T) {
	ctx := context.Background()
	ns := nodes("a", "b")
	for _, tc := range []struct {
		settings string
		kind     engine.Kind
		call     string
	}{
		{`{"scoreLabel": "kubernetes.io/hostname"}`, engine.KindGuest, "score"},
		{`{"at": "score", "how": "outofrange"}`, engine.KindInvalid, "score"},
		{`{"at": "normalize", "how": "panic"}`, engine.KindTrap, "normalize_score"},
		{`{"at": "score", "how": "panic"}`, engine.KindTrap, "score"},
	} {
		m, r := probe(t, "s", tc.settings, false)
		c := NewCycle(pod, ns, []Member{m})
		if !c.PreScore(ctx, ns) {
			t.Fatal("PreScore: no policy scores")
		}
		var s *Status
		for _, ni := range ns {
			if s = c.Score(ctx, ni); s != nil {
				break
			}
		}
		if s == nil {
			_, s = c.NormalizeScore(ctx, []string{"a", "b"})
		}
		if s == nil || s.Code != abiv1.Code_CODE_ERROR || s.Err == nil || s.Err.Kind != tc.kind || s.Err.Call != tc.call {
			t.Fatalf("%s: %+v, want Error of kind %s in %s", tc.settings, s, tc.kind, tc.call)
		}
		if last := r.failures[len(r.failures)-1]; last.outcome != Fail || last.kind != tc.kind {
			t.Fatalf("%s: observer told %+v", tc.settings, r.failures)
		}
	}

	bad, _ := probe(t, "bad", `{"at": "score", "how": "panic"}`, true)
	free, _ := probe(t, "count", `{"countNodes": true}`, false)
	c := NewCycle(pod, ns, []Member{bad, free})
	c.PreFilter(ctx)
	c.PreScore(ctx, ns)
	for _, ni := range ns {
		if s := c.Score(ctx, ni); s != nil {
			t.Fatalf("Score under Ignore: %+v", s)
		}
	}
	totals, s := c.NormalizeScore(ctx, []string{"b", "a"})
	if s != nil || len(totals) != 2 || totals[0] != 2 || totals[1] != 2 {
		t.Fatalf("NormalizeScore = %v, %+v; want [2 2] from count alone", totals, s)
	}
}

// TestBindingPointsCallEveryPolicy: PostBind has no verdict, so a failing
// policy does not keep the next from being told; Permit stops at the first
// failure and reports it.
func TestBindingPointsCallEveryPolicy(t *testing.T) {
	ctx := context.Background()
	ns := nodes("a")
	bad, br := probe(t, "bad", `{"at": "postbind", "how": "panic"}`, false)
	good, gr := probe(t, "good", `{"at": "postbind", "how": "none"}`, false)
	c := NewCycle(pod, ns, []Member{bad, good})
	if s, _ := c.NodeCall(ctx, abiv1.Point_POINT_POST_BIND, ns[0], nil); s != nil {
		t.Fatalf("PostBind verdict %+v, want none", s)
	}
	if outcomes(br) != "fail" || gr.calls[abiv1.Point_POINT_POST_BIND] != 1 {
		t.Fatalf("bad: %q, good called %d times; want a failure and good called once", outcomes(br), gr.calls[abiv1.Point_POINT_POST_BIND])
	}

	bad, _ = probe(t, "bad", `{"at": "permit", "how": "panic"}`, false)
	wait, wr := probe(t, "wait", `{"permit": "wait"}`, false)
	c = NewCycle(pod, ns, []Member{bad, wait})
	res := c.Permit(ctx, ns[0], nil)
	if res.Status == nil || res.Status.Code != abiv1.Code_CODE_UNSCHEDULABLE || res.Wait != 0 || wr.calls[abiv1.Point_POINT_PERMIT] != 0 {
		t.Fatalf("Permit = %+v (wait called %d times); want bad's failure first", res, wr.calls[abiv1.Point_POINT_PERMIT])
	}
	c = NewCycle(pod, ns, []Member{wait})
	if res := c.Permit(ctx, ns[0], nil); res.Status == nil || res.Status.Code != abiv1.Code_CODE_WAIT || res.Wait.Seconds() != 3 || len(res.WaitFor) != 1 {
		t.Fatalf("Permit = %+v, want Wait 3s for wait", res)
	}
}

func outcomes(r *record) string {
	var out []string
	for _, f := range r.failures {
		out = append(out, [...]string{"fail", "skip", "skip-again", "retry"}[f.outcome])
	}
	return strings.Join(out, " ")
}
