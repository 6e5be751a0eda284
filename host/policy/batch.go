package policy

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/engine"
)

// The framework calls Filter and Score once per node from 16 goroutines. Made
// one by one, each call takes an instance from the pool, installs the pod on
// it if it lacks it, and crosses into the guest; on a few cores the
// goroutines mostly wait for each other and every instance decodes every
// pod. FilterAll and ScoreAll do a cycle's calls in batches instead: a few
// workers, at most GOMAXPROCS, each hold one instance for a run of nodes.

// batchChunk is how many nodes a worker takes at a time.
const batchChunk = 64

// batchWorkers returns how many workers to use for n nodes.
func (p *Policy) batchWorkers(n int) int {
	return max(1, min(runtime.GOMAXPROCS(0), p.pool.Max(), (n+batchChunk-1)/batchChunk))
}

// forEach runs fn on every node of nodes by index, spread over workers that
// each hold an instance with the cycle installed. Before a worker runs fn
// on a chunk of nodes, it sends its instance those of them it does not hold
// in one request: a fresh instance (a policy just loaded, a pool that grew)
// learns a cluster in a few dozen requests rather than one per node. It
// stops at the first error and returns it.
func (p *Policy) forEach(ctx context.Context, call string, c *Cycle, nodes []fwk.NodeInfo, fn func(m *member, i int) error) error {
	n := len(nodes)
	var (
		next    atomic.Int64
		failed  atomic.Bool
		errOnce sync.Once
		first   error
		wg      sync.WaitGroup
	)
	work := func() {
		defer wg.Done()
		err := p.with(ctx, call, func(m *member) error {
			if err := p.prepare(m, c); err != nil {
				return err
			}
			for !failed.Load() {
				start := int(next.Add(batchChunk)) - batchChunk
				if start >= n {
					return nil
				}
				end := min(start+batchChunk, n)
				if err := p.syncChunk(m, nodes[start:end]); err != nil {
					return err
				}
				for i := start; i < end; i++ {
					if err := fn(m, i); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			failed.Store(true)
			errOnce.Do(func() { first = err })
		}
	}
	workers := p.batchWorkers(n)
	wg.Add(workers)
	for range workers - 1 {
		go work()
	}
	work()
	wg.Wait()
	return first
}

// syncChunk sends m, in one request, the nodes of chunk it does not hold as
// they are (syncNodes skips the rest). Nodes without a Node object are left
// to fn, which reports them.
func (p *Policy) syncChunk(m *member, chunk []fwk.NodeInfo) error {
	var present [batchChunk]fwk.NodeInfo
	k := 0
	for _, ni := range chunk {
		if ni != nil && ni.Node() != nil {
			present[k] = ni
			k++
		}
	}
	_, err := p.syncNodes(m, present[:k])
	return err
}

// Verdicts are the Filter verdicts of one cycle on the nodes of a snapshot,
// each valid for the node's generation it was judged at. It is read-only
// after FilterAll and safe for concurrent use.
type Verdicts struct {
	p *Policy
	// byHandle maps a node handle to 1 + its index in nodes; 0 for none.
	byHandle []int32
	nodes    []verdict
}

type verdict struct {
	gen    int64
	status Status
}

// Lookup returns the verdict on ni if the batch judged ni at its current
// generation. Otherwise (a node the batch did not see, or a modified copy
// as preemption evaluates) the caller must call Filter.
func (v *Verdicts) Lookup(ni fwk.NodeInfo) (Status, bool) {
	if v == nil || ni == nil || ni.Node() == nil {
		return Status{}, false
	}
	h, ok := v.p.handles.lookup(ni.Node().Name)
	if !ok || int(h) >= len(v.byHandle) || v.byHandle[h] == 0 {
		return Status{}, false
	}
	d := &v.nodes[v.byHandle[h]-1]
	if d.gen != ni.GetGeneration() {
		return Status{}, false
	}
	return d.status, true
}

// FilterAll runs the guest's Filter on every node, as Filter would one by
// one, and returns the verdicts. The guest's PreFilter must have passed
// (Filter is only called then). It fails on the first call that fails; the
// instance concerned is discarded as usual.
func (p *Policy) FilterAll(ctx context.Context, c *Cycle, nodes []fwk.NodeInfo) (*Verdicts, error) {
	v := &Verdicts{p: p, nodes: make([]verdict, len(nodes))}
	handles := make([]int32, len(nodes))
	err := p.forEach(ctx, "filter", c, nodes, func(m *member, i int) error {
		ni := nodes[i]
		if ni == nil || ni.Node() == nil {
			return nil // not judged: Filter reports it
		}
		h, err := p.ready(m, c, ni)
		if err != nil {
			return err
		}
		handles[i] = h + 1
		code, seq, err := m.in.Filter(h)
		if err != nil {
			return err
		}
		d := &v.nodes[i]
		d.gen = ni.GetGeneration()
		switch {
		case code == abiv1.Code_CODE_SUCCESS:
			d.status = success
		case seq != 0 && seq == m.rejectSeq && code == m.rejected.Code:
			d.status = m.rejected
		default:
			s, err := p.status(m, "filter", code)
			if err != nil {
				return err
			}
			m.rejectSeq, m.rejected = seq, s
			d.status = s
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	top := int32(0)
	for _, h := range handles {
		top = max(top, h)
	}
	v.byHandle = make([]int32, top)
	for i, h := range handles {
		if h > 0 {
			v.byHandle[h-1] = int32(i + 1)
		}
	}
	return v, nil
}

// Scores are the outcome of ScoreAll.
type Scores struct {
	// Values are the scores in the order of the nodes, when every call
	// succeeded.
	Values []int64
	// Normalized is set when Values are final: the guest ran its
	// NormalizeScore (if it has one) in the same call, so the host must not
	// call it again.
	Normalized bool
	// Bad is the index of the node whose Score did not answer Success, or
	// the number of nodes when the guest's NormalizeScore did not; -1 when
	// everything succeeded. Status is that verdict.
	Bad    int
	Status Status
}

// ScoreAll runs the guest's Score on every node. A module that exports
// wasmsched_score_nodes scores them all, and normalises the scores, in one
// call on one instance; otherwise workers call Score node by node. A call
// that fails returns an error.
func (p *Policy) ScoreAll(ctx context.Context, c *Cycle, nodes []fwk.NodeInfo) (Scores, error) {
	if p.scoresNodes {
		return p.scoreNodes(ctx, c, nodes, false)
	}
	res := Scores{Values: make([]int64, len(nodes)), Bad: -1, Status: success}
	var mu sync.Mutex
	errRejected := &batchStop{}
	err := p.forEach(ctx, "score", c, nodes, func(m *member, i int) error {
		h, err := p.ready(m, c, nodes[i])
		if err != nil {
			return err
		}
		v, code, err := m.in.Score(h)
		if err != nil {
			return err
		}
		if code != abiv1.Code_CODE_SUCCESS {
			st, err := p.status(m, "score", code)
			if err != nil {
				return err
			}
			mu.Lock()
			if res.Bad < 0 {
				res.Bad, res.Status = i, st
			}
			mu.Unlock()
			return errRejected
		}
		res.Values[i] = v
		return nil
	})
	switch {
	case err == errRejected:
		res.Values = nil
		return res, nil
	case err != nil:
		return Scores{Bad: -1}, err
	}
	return res, nil
}

// scoreNodes is ScoreAll in one wasmsched_score_nodes call, or, with raw,
// in one wasmsched_score_nodes_raw call: the scores not normalised.
func (p *Policy) scoreNodes(ctx context.Context, c *Cycle, nodes []fwk.NodeInfo, raw bool) (Scores, error) {
	call, score := "score_nodes", (*engine.Instance).ScoreNodes
	if raw {
		call, score = "score_nodes_raw", (*engine.Instance).ScoreNodesRaw
	}
	res := Scores{Bad: -1, Status: success}
	err := p.with(ctx, call, func(m *member) error {
		if err := p.prepare(m, c); err != nil {
			return err
		}
		hs, err := p.syncNodes(m, nodes)
		if err != nil {
			return err
		}
		values, code, bad, err := score(m.in, hs)
		if err != nil {
			return err
		}
		if code != abiv1.Code_CODE_SUCCESS {
			st, err := p.status(m, call, code)
			if err != nil {
				return err
			}
			res.Bad, res.Status = bad, st
			return nil
		}
		res.Values, res.Normalized = values, !raw
		return nil
	})
	if err != nil {
		return Scores{Bad: -1}, err
	}
	return res, nil
}

// batchStop stops a batch without an error of its own.
type batchStop struct{}

func (*batchStop) Error() string { return "batch stopped" }
