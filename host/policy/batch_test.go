package policy

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/engine"
)

// batchNodes are 300 nodes (several chunks per worker): every fifth has the
// label "bad", node i has score label s=i.
func batchNodes() []fwk.NodeInfo {
	var nodes []fwk.NodeInfo
	for i := 0; i < 300; i++ {
		labels := map[string]string{"s": fmt.Sprint(i)}
		if i%5 == 0 {
			labels["bad"] = ""
		}
		nodes = append(nodes, mkNode(fmt.Sprintf("n%d", i), labels))
	}
	return nodes
}

// TestFilterAllMatchesFilter: the batch gives every node the verdict and
// reasons that Filter gives it, across cycles, while other goroutines look
// verdicts up; a node at another generation is not answered from the batch.
func TestFilterAllMatchesFilter(t *testing.T) {
	p := load(t, `{"rejectLabel": "bad", "scoreLabel": "s"}`, func(o *Options) { o.MaxInstances = 4 })
	nodes := batchNodes()
	for cycle := 0; cycle < 3; cycle++ {
		c := NewCycle(mkPod(fmt.Sprint("p", cycle)), nodes)
		v, err := p.FilterAll(ctx, c, nodes)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < len(nodes); i += 16 {
					got, ok := v.Lookup(nodes[i])
					if !ok {
						t.Errorf("n%d: no verdict in the batch", i)
						continue
					}
					want, err := p.Filter(ctx, c, nodes[i])
					if err != nil {
						t.Errorf("n%d: %v", i, err)
						continue
					}
					if got.Code != want.Code || strings.Join(got.Reasons, "|") != strings.Join(want.Reasons, "|") || got.IsSuccess() != (i%5 != 0) {
						t.Errorf("n%d: batch %+v, Filter %+v", i, got, want)
					}
				}
			}()
		}
		wg.Wait()
	}
	if got := p.Stats().PodsSent; got > 3*4*2 {
		t.Errorf("pods sent %d times for 3 cycles on at most 4 instances", got)
	}

	c := NewCycle(mkPod("q"), nodes)
	v, err := p.FilterAll(ctx, c, nodes)
	if err != nil {
		t.Fatal(err)
	}
	changed := nodes[7].Snapshot()
	changed.AddPodInfo(mustPodInfo(t, withNode(mkPod("extra"), "n7")))
	if s, ok := v.Lookup(changed); ok {
		t.Fatalf("verdict %+v for a node at a generation the batch did not judge", s)
	}
	if s, ok := v.Lookup(mkNode("unknown", nil)); ok {
		t.Fatalf("verdict %+v for a node the batch did not see", s)
	}
	var none *Verdicts
	if _, ok := none.Lookup(nodes[0]); ok {
		t.Fatal("a nil batch answered")
	}
}

// TestScoreAll: the scores in node order; a guest Error on one node names
// it; a failing call fails the batch with the engine's error and the
// instance is replaced. In one wasmsched_score_nodes call (what the SDK
// builds) and node by node (a module without that export).
func TestScoreAll(t *testing.T) {
	for _, oneCall := range []bool{true, false} {
		t.Run(map[bool]string{true: "one call", false: "node by node"}[oneCall], func(t *testing.T) {
			score := map[bool]string{true: "score_nodes", false: "score"}[oneCall]
			p := load(t, `{"scoreLabel": "s"}`, func(o *Options) { o.MaxInstances = 2 })
			if !p.scoresNodes {
				t.Fatal("the SDK's module does not export wasmsched_score_nodes")
			}
			p.scoresNodes = oneCall
			nodes := batchNodes()
			res, err := p.ScoreAll(ctx, NewCycle(mkPod("p"), nodes), nodes)
			if err != nil || res.Bad >= 0 || !res.Status.IsSuccess() || res.Normalized != oneCall || len(res.Values) != len(nodes) {
				t.Fatalf("ScoreAll: %+v %v", res, err)
			}
			for i, v := range res.Values {
				if v != int64(i) {
					t.Fatalf("score of n%d = %d", i, v)
				}
			}

			nodes[123] = mkNode("n123", map[string]string{"s": "x"})
			res, err = p.ScoreAll(ctx, NewCycle(mkPod("p2"), nodes), nodes)
			if err != nil || res.Bad != 123 || res.Status.Code != abiv1.Code_CODE_ERROR || !strings.Contains(res.Status.Reasons[0], `label s="x" is not an integer`) {
				t.Fatalf("got %+v %v, want node 123 with the guest's error", res, err)
			}

			p2 := load(t, `{"at": "score", "how": "panic", "every": 50}`, func(o *Options) { o.MaxInstances = 2 })
			p2.scoresNodes = oneCall
			_, err = p2.ScoreAll(ctx, NewCycle(mkPod("p"), nodes), nodes)
			var ce *engine.CallError
			if !errors.As(err, &ce) || ce.Kind != engine.KindTrap || ce.Call != score {
				t.Fatalf("got %v, want a trap in %s", err, score)
			}
		})
	}
}

// TestScoreAllNormalizes: one wasmsched_score_nodes call gives the scores
// that Score node by node and then NormalizeScore give; a NormalizeScore
// that rejects is reported at index len(nodes).
func TestScoreAllNormalizes(t *testing.T) {
	p := load(t, `{"scoreLabel": "s", "normalize": true}`)
	nodes := batchNodes()[:50]
	for i := range nodes {
		nodes[i] = mkNode(fmt.Sprintf("n%d", i), map[string]string{"s": fmt.Sprint((i * 37) % 50)})
	}
	c := NewCycle(mkPod("p"), nodes)
	fused, err := p.ScoreAll(ctx, c, nodes)
	if err != nil || fused.Bad >= 0 || !fused.Normalized {
		t.Fatalf("ScoreAll: %+v %v", fused, err)
	}
	p.scoresNodes = false
	raw, err := p.ScoreAll(ctx, c, nodes)
	if err != nil || raw.Bad >= 0 || raw.Normalized {
		t.Fatalf("ScoreAll node by node: %+v %v", raw, err)
	}
	scores := make([]NodeScore, len(nodes))
	for i, ni := range nodes {
		scores[i] = NodeScore{Name: ni.Node().Name, Score: raw.Values[i]}
	}
	if s, err := p.NormalizeScore(ctx, c, nodes, scores); err != nil || !s.IsSuccess() {
		t.Fatalf("NormalizeScore: %+v %v", s, err)
	}
	for i := range nodes {
		if fused.Values[i] != scores[i].Score {
			t.Fatalf("node %d: one call %d, Score then NormalizeScore %d (raw %d)", i, fused.Values[i], scores[i].Score, raw.Values[i])
		}
	}
	if fused.Values[0] != 0 || fused.Values[1] != 75 { // raw 0 and 37 of 0..49
		t.Fatalf("scores %v, want min-max normalised", fused.Values[:2])
	}

	p = load(t, `{"scoreLabel": "s", "at": "normalize", "how": "wasi"}`)
	res, err := p.ScoreAll(ctx, NewCycle(mkPod("p"), nodes), nodes)
	if err != nil || res.Bad != len(nodes) || res.Status.Code != abiv1.Code_CODE_UNSCHEDULABLE || !strings.HasPrefix(res.Status.Reasons[0], "probe: wasi:") {
		t.Fatalf("got %+v %v, want NormalizeScore's rejection at index %d", res, err, len(nodes))
	}
}

// TestFilterAllFailure: a trap on one node fails the batch with the
// engine's error.
func TestFilterAllFailure(t *testing.T) {
	p := load(t, `{"at": "filter", "how": "panic", "every": 100}`, func(o *Options) { o.MaxInstances = 2 })
	nodes := batchNodes()
	_, err := p.FilterAll(ctx, NewCycle(mkPod("p"), nodes), nodes)
	var ce *engine.CallError
	if !errors.As(err, &ce) || ce.Kind != engine.KindTrap || !strings.Contains(err.Error(), "deliberate panic in filter") {
		t.Fatalf("got %v, want the trap", err)
	}
}

// TestFilterAllSyncsInChunks: a fresh instance learns the cycle's nodes in
// one request per chunk of batchChunk nodes, not one per node; a later
// batch sends only the node that changed, and verdicts stay right.
func TestFilterAllSyncsInChunks(t *testing.T) {
	p := load(t, `{"rejectLabel": "bad"}`)
	nodes := batchNodes()
	syncs := func() int64 { return guestCalls(p, "sync") }
	if _, err := p.FilterAll(ctx, NewCycle(mkPod("p"), nodes), nodes); err != nil {
		t.Fatal(err)
	}
	chunks := int64((len(nodes) + batchChunk - 1) / batchChunk)
	if got := syncs(); got != chunks {
		t.Fatalf("%d sync requests for %d nodes on one instance, want %d (one per chunk of %d)", got, len(nodes), chunks, batchChunk)
	}
	if got := p.Stats().NodesSent; got != int64(len(nodes)) {
		t.Fatalf("%d nodes sent, want %d", got, len(nodes))
	}

	changed := nodes[7].Snapshot()
	changed.AddPodInfo(mustPodInfo(t, withNode(mkPod("extra"), "n7")))
	node := changed.Node().DeepCopy() // a new object: sent whole, not as usage
	node.Labels["bad"] = ""
	changed.SetNode(node)
	nodes[7] = changed
	v, err := p.FilterAll(ctx, NewCycle(mkPod("q"), nodes), nodes)
	if err != nil {
		t.Fatal(err)
	}
	if got := syncs(); got != chunks+1 {
		t.Fatalf("%d sync requests after one node changed, want %d", got, chunks+1)
	}
	for i, ni := range nodes {
		s, ok := v.Lookup(ni)
		if !ok || s.IsSuccess() != (i%5 != 0 && i != 7) {
			t.Errorf("n%d: verdict %+v (found %v)", i, s, ok)
		}
	}
}
