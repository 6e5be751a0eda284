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
// instance is replaced.
func TestScoreAll(t *testing.T) {
	p := load(t, `{"scoreLabel": "s"}`, func(o *Options) { o.MaxInstances = 2 })
	nodes := batchNodes()
	scores, bad, s, err := p.ScoreAll(ctx, NewCycle(mkPod("p"), nodes), nodes)
	if err != nil || bad >= 0 || !s.IsSuccess() {
		t.Fatalf("ScoreAll: %d %+v %v", bad, s, err)
	}
	for i, v := range scores {
		if v != int64(i) {
			t.Fatalf("score of n%d = %d", i, v)
		}
	}

	nodes[123] = mkNode("n123", map[string]string{"s": "x"})
	_, bad, s, err = p.ScoreAll(ctx, NewCycle(mkPod("p2"), nodes), nodes)
	if err != nil || bad != 123 || s.Code != abiv1.Code_CODE_ERROR || !strings.Contains(s.Reasons[0], `label s="x" is not an integer`) {
		t.Fatalf("got bad=%d %+v %v, want node 123 with the guest's error", bad, s, err)
	}

	p2 := load(t, `{"at": "score", "how": "panic", "every": 50}`, func(o *Options) { o.MaxInstances = 2 })
	_, _, _, err = p2.ScoreAll(ctx, NewCycle(mkPod("p"), nodes), nodes)
	var ce *engine.CallError
	if !errors.As(err, &ce) || ce.Kind != engine.KindTrap || ce.Call != "score" {
		t.Fatalf("got %v, want a trap in score", err)
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
