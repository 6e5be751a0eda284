package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// testCallTimeout bounds the calls of tests that are not about deadlines:
// under -race, on a 2-core machine busy with other tests, a call that takes
// milliseconds alone can miss the default 200 ms. Tests of deadlines set
// their own.
const testCallTimeout = 10 * time.Second

// probeOptions loads the probe guest with settings, one instance and
// testCallTimeout, then applies tweak.
func probeOptions(t *testing.T, settings string, tweak []func(*Options)) Options {
	t.Helper()
	opts := Options{Name: "probe", Wasm: testwasm.Bytes(t, "test/guests/probe"), Settings: []byte(settings), MaxInstances: 1,
		Engine: engine.Config{CallTimeout: testCallTimeout}}
	for _, f := range tweak {
		f(&opts)
	}
	return opts
}

func load(t *testing.T, settings string, tweak ...func(*Options)) *Policy {
	t.Helper()
	p, err := Load(context.Background(), probeOptions(t, settings, tweak))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func loadErr(t *testing.T, settings string, tweak ...func(*Options)) error {
	t.Helper()
	p, err := Load(context.Background(), probeOptions(t, settings, tweak))
	if err == nil {
		_ = p.Close(context.Background())
		t.Fatalf("Load succeeded, want an error")
	}
	return err
}

func mkPod(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}}},
	}
}

func mkNode(name string, labels map[string]string, pods ...*v1.Pod) fwk.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourcePods: resource.MustParse("110")}}})
	return ni
}

var ctx = context.Background()

func TestFilterVerdictsAndReasons(t *testing.T) {
	p := load(t, `{"rejectLabel": "bad"}`)
	nodes := []fwk.NodeInfo{mkNode("n1", nil), mkNode("n2", map[string]string{"bad": ""})}
	c := NewCycle(mkPod("p"), nodes)
	s, err := p.Filter(ctx, c, nodes[0])
	if err != nil || !s.IsSuccess() {
		t.Fatalf("n1: %v %v, want success", s, err)
	}
	s, err = p.Filter(ctx, c, nodes[1])
	if err != nil {
		t.Fatal(err)
	}
	if s.Code != abiv1.Code_CODE_UNSCHEDULABLE || len(s.Reasons) != 1 || s.Reasons[0] != "probe: node n2 has label bad" {
		t.Fatalf("n2: %+v, want Unschedulable with the probe's reason", s)
	}
	if !p.Implements(abiv1.Point_POINT_FILTER) || !p.Implements(abiv1.Point_POINT_PERMIT) || p.Implements(abiv1.Point_POINT_POST_FILTER) {
		t.Fatalf("points = %b", p.Info().Points)
	}
}

// TestScoreAndNormalize: NormalizeScore gives the same scores, and the same
// rejection, through wasmsched_normalize_scores (packed integers) as
// through wasmsched_call with a ScoreList.
func TestScoreAndNormalize(t *testing.T) {
	nodes := []fwk.NodeInfo{mkNode("a", map[string]string{"s": "10"}), mkNode("b", map[string]string{"s": "30"}), mkNode("c", map[string]string{"s": "20"})}
	for _, packed := range []bool{true, false} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			p := load(t, `{"scoreLabel": "s", "normalize": true}`)
			if !p.normalizesRaw {
				t.Fatal("the SDK-built probe does not export wasmsched_normalize_scores")
			}
			p.normalizesRaw = packed
			c := NewCycle(mkPod("p"), nodes)
			var scores []NodeScore
			for _, n := range nodes {
				v, s, err := p.Score(ctx, c, n)
				if err != nil || !s.IsSuccess() {
					t.Fatalf("score %s: %v %v", n.Node().Name, s, err)
				}
				scores = append(scores, NodeScore{Name: n.Node().Name, Score: v})
			}
			if scores[0].Score != 10 || scores[1].Score != 30 {
				t.Fatalf("raw scores %v", scores)
			}
			s, err := p.NormalizeScore(ctx, c, nodes, scores)
			if err != nil || !s.IsSuccess() {
				t.Fatalf("normalize: %v %v", s, err)
			}
			want := []int64{0, 100, 50}
			for i, w := range want {
				if scores[i].Score != w {
					t.Fatalf("normalised %v, want %v", scores, want)
				}
			}

			q := load(t, `{"scoreLabel": "s", "at": "normalize", "how": "wasi"}`)
			q.normalizesRaw = packed
			c = NewCycle(mkPod("p"), nodes)
			for i := range scores {
				scores[i].Score = int64(10 * i)
			}
			s, err = q.NormalizeScore(ctx, c, nodes, scores)
			if err != nil || s.Code != abiv1.Code_CODE_UNSCHEDULABLE || len(s.Reasons) != 1 || !strings.HasPrefix(s.Reasons[0], "probe: wasi:") {
				t.Fatalf("rejecting normalize: %+v %v, want Unschedulable with the probe's reason", s, err)
			}
			if scores[2].Score != 20 {
				t.Fatalf("a rejected normalize changed the scores: %v", scores)
			}
		})
	}
}

func TestScoreErrorAndOverflow(t *testing.T) {
	p := load(t, `{"scoreLabel": "s"}`)
	n := mkNode("a", map[string]string{"s": "x"})
	_, s, err := p.Score(ctx, NewCycle(mkPod("p"), nil), n)
	if err != nil || s.Code != abiv1.Code_CODE_ERROR || !strings.Contains(s.Reasons[0], `label s="x" is not an integer`) {
		t.Fatalf("got %+v %v", s, err)
	}
	p2 := load(t, `{"at": "score", "how": "bigscore"}`)
	_, s, err = p2.Score(ctx, NewCycle(mkPod("p"), nil), n)
	if err != nil || s.Code != abiv1.Code_CODE_ERROR || !strings.Contains(s.Reasons[0], "does not fit in an int32") {
		t.Fatalf("got %+v %v", s, err)
	}
}

// guestCalls is how many calls p's instances have made to one export of
// the guest ("sync", "result", ...).
func guestCalls(p *Policy, export string) (calls int64) {
	for _, g := range p.Stats().Guest {
		if g.Export == export {
			calls += g.Calls
		}
	}
	return calls
}

// TestPreFilter: PreFilter's verdict, its reasons and the nodes it
// restricts the cycle to; the host fetches the guest's Result only when the
// guest said it holds more than the code (CYCLE_FLAG_NO_DETAIL).
func TestPreFilter(t *testing.T) {
	resultCalls := func(p *Policy) int64 { return guestCalls(p, "result") }
	p := load(t, `{"restrictTo": ["n2"]}`)
	before := resultCalls(p) // init's
	res, err := p.PreFilter(ctx, NewCycle(mkPod("p"), nil))
	if err != nil || !res.Status.IsSuccess() || !res.Restricted || len(res.NodeNames) != 1 || res.NodeNames[0] != "n2" {
		t.Fatalf("got %+v %v", res, err)
	}
	if n := resultCalls(p) - before; n != 1 {
		t.Errorf("restricted: %d result calls, want 1", n)
	}
	p = load(t, `{"preFilterReject": "probe: not today"}`)
	before = resultCalls(p)
	res, err = p.PreFilter(ctx, NewCycle(mkPod("p"), nil))
	if err != nil || res.Status.Code != abiv1.Code_CODE_UNSCHEDULABLE || res.Status.Reasons[0] != "probe: not today" {
		t.Fatalf("got %+v %v", res, err)
	}
	if n := resultCalls(p) - before; n != 1 {
		t.Errorf("rejected: %d result calls, want 1", n)
	}
	p = load(t, `{}`)
	before = resultCalls(p)
	for range 3 {
		res, err = p.PreFilter(ctx, NewCycle(mkPod("p"), nil))
		if err != nil || !res.Status.IsSuccess() || res.Restricted || len(res.Status.Reasons) != 0 {
			t.Fatalf("got %+v %v", res, err)
		}
	}
	if n := resultCalls(p) - before; n != 0 {
		t.Errorf("success without detail: %d result calls, want none", n)
	}
}

func TestSyncIsIncrementalByGeneration(t *testing.T) {
	p := load(t, `{"rejectLabel": "bad"}`)
	nodes := []fwk.NodeInfo{mkNode("n1", nil), mkNode("n2", nil), mkNode("n3", nil)}
	filterAll := func(c *Cycle, nodes []fwk.NodeInfo) {
		t.Helper()
		for _, n := range nodes {
			if s, err := p.Filter(ctx, c, n); err != nil || !s.IsSuccess() {
				t.Fatalf("filter %s: %v %v", n.Node().Name, s, err)
			}
		}
	}
	filterAll(NewCycle(mkPod("a"), nodes), nodes)
	filterAll(NewCycle(mkPod("b"), nodes), nodes)
	if st := p.Stats(); st.NodesSent != 3 || st.PodsSent != 2 {
		t.Fatalf("after two cycles over unchanged nodes: %+v, want 3 nodes and 2 pods sent", st)
	}
	// A pod lands on n2: its generation changes, only its usage is sent.
	nodes[1].AddPodInfo(mustPodInfo(t, mkPod("x")))
	filterAll(NewCycle(mkPod("c"), nodes), nodes)
	if st := p.Stats(); st.NodesSent != 3 || st.UsageSent != 1 {
		t.Fatalf("after one node changed: %+v, want 3 nodes sent whole and 1 usage update", st)
	}
	// A clone (as preemption evaluates) carries another generation and is
	// the truth for its call; the original is resent when used again.
	clone := nodes[0].Snapshot()
	clone.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"bad": ""}}})
	c := NewCycle(mkPod("d"), nodes)
	if s, _ := p.Filter(ctx, c, clone); s.Code != abiv1.Code_CODE_UNSCHEDULABLE {
		t.Fatalf("clone with the reject label: %+v, want Unschedulable", s)
	}
	if s, _ := p.Filter(ctx, c, nodes[0]); !s.IsSuccess() {
		t.Fatalf("original after the clone: %+v, want success", s)
	}
}

// TestUsageUpdates: a node whose object stays the same while pods come and
// go is sent as a usage update, and the guest reads the new amounts from
// it; a new node object, and every change for a guest that wants pods, is
// sent whole.
func TestUsageUpdates(t *testing.T) {
	for _, c := range []struct {
		name      string
		settings  string
		wantUsage bool
	}{
		{"usage", `{"scoreFree": "cpu"}`, true},
		{"wantsPods", `{"scoreFree": "cpu", "wantsPods": true}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := load(t, c.settings)
			ni := mkNode("n1", map[string]string{"zone": "a"})
			free := func(want int64) {
				t.Helper()
				v, s, err := p.Score(ctx, NewCycle(mkPod("probe"), nil), ni)
				if err != nil || !s.IsSuccess() || v != want {
					t.Fatalf("free cpu = %d (%+v, %v), want %d", v, s, err, want)
				}
			}
			free(4000)
			x, y := withNode(mkPod("x"), "n1"), withNode(mkPod("y"), "n1")
			ni.AddPodInfo(mustPodInfo(t, x))
			free(3900)
			ni.AddPodInfo(mustPodInfo(t, y))
			free(3800)
			if err := ni.RemovePod(klog.Background(), x); err != nil {
				t.Fatal(err)
			}
			free(3900)
			whole, usage := int64(4), int64(0)
			if c.wantUsage {
				whole, usage = 1, 3
			}
			if st := p.Stats(); st.NodesSent != whole || st.UsageSent != usage {
				t.Fatalf("after three pod changes: %d nodes sent whole and %d usage updates, want %d and %d", st.NodesSent, st.UsageSent, whole, usage)
			}
			// y updated in place (as the API server confirms an assumed
			// pod): a new generation, the same usage, which a usage guest
			// holds already; a guest that wants pods gets the node again.
			gen := ni.GetGeneration()
			if err := ni.RemovePod(klog.Background(), y); err != nil {
				t.Fatal(err)
			}
			ni.AddPodInfo(mustPodInfo(t, withNode(mkPod("y"), "n1")))
			if ni.GetGeneration() == gen {
				t.Fatal("updating a pod left the node's generation as it was")
			}
			free(3900)
			unchanged := int64(0)
			if c.wantUsage {
				unchanged = 1
			} else {
				whole++
			}
			if st := p.Stats(); st.NodesSent != whole || st.UsageSent != usage || st.UsageUnchanged != unchanged {
				t.Fatalf("after a pod updated in place: %d nodes sent whole, %d usage updates, %d left unsent; want %d, %d and %d",
					st.NodesSent, st.UsageSent, st.UsageUnchanged, whole, usage, unchanged)
			}
			// The next real change goes out again.
			ni.AddPodInfo(mustPodInfo(t, withNode(mkPod("z"), "n1")))
			free(3800)
			if c.wantUsage {
				usage++
			} else {
				whole++
			}
			if st := p.Stats(); st.NodesSent != whole || st.UsageSent != usage {
				t.Fatalf("after a pod added: %d nodes sent whole and %d usage updates, want %d and %d", st.NodesSent, st.UsageSent, whole, usage)
			}
			// A new node object (its allocatable changed) goes whole.
			node := ni.Node().DeepCopy()
			node.Status.Allocatable[v1.ResourceCPU] = resource.MustParse("8")
			ni.SetNode(node)
			free(7800)
			if st := p.Stats(); st.NodesSent != whole+1 || st.UsageSent != usage {
				t.Fatalf("after a new node object: %d nodes sent whole and %d usage updates, want %d and %d", st.NodesSent, st.UsageSent, whole+1, usage)
			}
		})
	}
}

func mustPodInfo(t *testing.T, pod *v1.Pod) fwk.PodInfo {
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		t.Fatal(err)
	}
	return pi
}

func TestWantsAllNodesAndPods(t *testing.T) {
	p := load(t, `{"countNodes": true}`)
	nodes := []fwk.NodeInfo{mkNode("n1", nil), mkNode("n2", nil), mkNode("n3", nil)}
	v, _, err := p.Score(ctx, NewCycle(mkPod("a"), nodes), nodes[0])
	if err != nil || v != 3 {
		t.Fatalf("resident nodes = %d (%v), want 3", v, err)
	}
	v, _, err = p.Score(ctx, NewCycle(mkPod("b"), nodes[:2]), nodes[0])
	if err != nil || v != 2 {
		t.Fatalf("after a node left: resident nodes = %d (%v), want 2", v, err)
	}

	p = load(t, `{"scorePods": true}`)
	busy := mkNode("busy", nil, withNode(mkPod("x"), "busy"), withNode(mkPod("y"), "busy"))
	v, _, err = p.Score(ctx, NewCycle(mkPod("c"), nil), busy)
	if err != nil || v != 2 {
		t.Fatalf("pods on node = %d (%v), want 2", v, err)
	}
}

func withNode(p *v1.Pod, node string) *v1.Pod {
	p.Spec.NodeName = node
	return p
}

func TestPermit(t *testing.T) {
	n := mkNode("n1", nil)
	p := load(t, `{"permit": "wait"}`)
	res, err := p.Permit(ctx, NewCycle(mkPod("a"), nil), n, nil)
	if err != nil || res.Status.Code != abiv1.Code_CODE_WAIT || res.Timeout != 3*time.Second {
		t.Fatalf("got %+v %v", res, err)
	}
	p = load(t, `{"permit": "reject"}`)
	res, err = p.Permit(ctx, NewCycle(mkPod("a"), nil), n, nil)
	if err != nil || res.Status.Code != abiv1.Code_CODE_UNSCHEDULABLE || res.Status.Reasons[0] != "probe: permit rejected on n1" {
		t.Fatalf("got %+v %v", res, err)
	}
	s, _, err := p.NodeCall(ctx, abiv1.Point_POINT_RESERVE, NewCycle(mkPod("a"), nil), n, nil)
	if err != nil || !s.IsSuccess() {
		t.Fatalf("reserve: %+v %v", s, err)
	}
}

func TestLoadErrors(t *testing.T) {
	testwasm.SkipUnderRace(t)
	for _, tc := range []struct {
		name, settings string
		tweak          func(*Options)
		kind           engine.Kind
		want           string
	}{
		{"rejected settings", `{"rejectSettings": true}`, nil, engine.KindRejected, "probe: settings rejected on request"},
		{"unknown setting", `{"nope": 1}`, nil, engine.KindRejected, `settings: json: unknown field "nope"`},
		{"settings not JSON", `{`, nil, engine.KindRejected, "settings: unexpected EOF"},
		{"loop in settings", `{"at": "settings", "how": "loop"}`, func(o *Options) { o.Engine.InitTimeout = 300 * time.Millisecond }, engine.KindTimeout, "deadline of 300ms exceeded"},
		{"panic in settings", `{"at": "settings", "how": "panic"}`, nil, engine.KindTrap, "panic: probe: deliberate panic in settings"},
		{"memory in settings", `{"at": "settings", "how": "grow"}`, func(o *Options) { o.Engine.MemoryLimit = 32 << 20 }, engine.KindMemory, "the memory limit was reached"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tweaks := []func(*Options){}
			if tc.tweak != nil {
				tweaks = append(tweaks, tc.tweak)
			}
			err := loadErr(t, tc.settings, tweaks...)
			var ce *engine.CallError
			if !errors.As(err, &ce) || ce.Kind != tc.kind || ce.Policy != "probe" || ce.Call != "init" {
				t.Fatalf("err = %v (%#v), want a %s error from init", err, ce, tc.kind)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "policy probe@") {
				t.Fatalf("err = %q, want it to name the policy and contain %q", err, tc.want)
			}
		})
	}
	if _, err := Load(ctx, Options{Name: "junk", Wasm: []byte("not wasm at all")}); err == nil || !strings.Contains(err.Error(), "not a valid WebAssembly module") {
		t.Fatalf("junk bytes: %v", err)
	}
}

func TestFailuresReplaceTheInstance(t *testing.T) {
	for _, tc := range []struct {
		how  string
		kind engine.Kind
		want string
	}{
		{"panic", engine.KindTrap, "panic: probe: deliberate panic in filter"},
		{"loop", engine.KindTimeout, "deadline of 50ms exceeded"},
		{"grow", engine.KindMemory, "the memory limit was reached"},
		{"zero", engine.KindInvalid, "status code 0"},
	} {
		t.Run(tc.how, func(t *testing.T) {
			p := load(t, fmt.Sprintf(`{"at": "filter", "how": %q, "every": 2}`, tc.how), func(o *Options) {
				o.Engine.CallTimeout = 50 * time.Millisecond
				if tc.how == "grow" {
					o.Engine.CallTimeout = 5 * time.Second
				}
				o.Engine.MemoryLimit = 32 << 20
			})
			n := mkNode("n1", nil)
			c := NewCycle(mkPod("a"), nil)
			if s, err := p.Filter(ctx, c, n); err != nil || !s.IsSuccess() {
				t.Fatalf("first call: %v %v", s, err)
			}
			_, err := p.Filter(ctx, c, n)
			var ce *engine.CallError
			if !errors.As(err, &ce) || ce.Kind != tc.kind || ce.Call != "filter" || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("second call: %v, want %s error containing %q", err, tc.kind, tc.want)
			}
			// The broken instance is gone; a fresh one serves the next call
			// (its call counter restarts, so the first call succeeds).
			if s, err := p.Filter(ctx, c, n); err != nil || !s.IsSuccess() {
				t.Fatalf("after the failure: %v %v, want a fresh instance to succeed", s, err)
			}
			if got := p.Instances(); got != 1 {
				t.Fatalf("instances = %d, want 1", got)
			}
		})
	}
}

func TestConcurrentCallers(t *testing.T) {
	p := load(t, `{"rejectLabel": "bad", "scoreLabel": "s"}`, func(o *Options) { o.MaxInstances = 4 })
	var nodes []fwk.NodeInfo
	for i := 0; i < 50; i++ {
		labels := map[string]string{"s": fmt.Sprint(i)}
		if i%5 == 0 {
			labels["bad"] = ""
		}
		nodes = append(nodes, mkNode(fmt.Sprintf("n%d", i), labels))
	}
	var wg sync.WaitGroup
	for cycle := 0; cycle < 5; cycle++ {
		c := NewCycle(mkPod(fmt.Sprint("p", cycle)), nodes)
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < len(nodes); i += 16 {
					s, err := p.Filter(ctx, c, nodes[i])
					if err != nil || s.IsSuccess() != (i%5 != 0) {
						t.Errorf("filter n%d: %v %v", i, s, err)
					}
					v, _, err := p.Score(ctx, c, nodes[i])
					if err != nil || v != int64(i) {
						t.Errorf("score n%d = %d, %v", i, v, err)
					}
				}
			}()
		}
		wg.Wait()
	}
	if n := p.Instances(); n < 1 || n > 4 {
		t.Fatalf("instances = %d, want 1..4", n)
	}
}

// A call that cannot have an instance fails with a CallError naming the
// call and why (here: the policy was closed).
func TestNoInstanceIsACallError(t *testing.T) {
	p := load(t, `{}`)
	nodes := []fwk.NodeInfo{mkNode("n1", nil)}
	c := NewCycle(mkPod("p"), nodes)
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, _, err := p.Score(ctx, c, nodes[0])
	var ce *engine.CallError
	if !errors.As(err, &ce) || ce != err || ce.Kind != engine.KindClosed || ce.Call != "score" ||
		!strings.Contains(err.Error(), ": score: no instance: ") {
		t.Fatalf("Score after Close: %v (%#v), want a closed CallError of score", err, ce)
	}
}
