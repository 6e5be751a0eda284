package policy

import (
	"fmt"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/convert"
	"github.com/wasmsched/wasmsched/host/engine"
)

// Cycle is the host side of one scheduling cycle of one pod. Create it once
// per cycle with NewCycle and pass it to every call of that cycle, for every
// policy; the pod is encoded once and each instance decodes it once.
// It is safe for concurrent use.
type Cycle struct {
	ID  uint64
	Pod *v1.Pod
	// Nodes is the cycle's snapshot, needed by policies that declare
	// wants_all_nodes. It may be nil when none does.
	Nodes []fwk.NodeInfo

	once sync.Once
	req  []byte

	// released is set when the scheduling cycle ends: the scheduler reuses
	// the snapshot's NodeInfos for the next cycle, so the binding phase
	// must not read Nodes any more.
	released atomic.Bool
}

// ReleaseSnapshot marks the end of the scheduling cycle (after Permit):
// later calls of this cycle run on whatever the instance holds and never
// read the snapshot again.
func (c *Cycle) ReleaseSnapshot() { c.released.Store(true) }

var cycleIDs atomic.Uint64

// NewCycle starts a cycle for pod over the snapshot nodes.
func NewCycle(pod *v1.Pod, nodes []fwk.NodeInfo) *Cycle {
	return &Cycle{ID: cycleIDs.Add(1), Pod: pod, Nodes: nodes}
}

func (c *Cycle) request() []byte {
	c.once.Do(func() {
		c.req = engine.Marshal(&abiv1.CycleRequest{Cycle: c.ID, Pod: convert.Pod(c.Pod)})
	})
	return c.req
}

// encodedNode is a NodeInfo message encoded as one NodeSync.upserts entry
// (field tag and length included), so NodeSync requests are built by
// concatenation and every instance gets the bytes encoded once.
type encodedNode struct {
	gen   int64
	entry []byte
}

// nodeCache keeps the last encoding of each node, by handle.
type nodeCache struct{ m sync.Map } // int32 -> *encodedNode

func (p *Policy) encode(h int32, ni fwk.NodeInfo) []byte {
	gen := ni.GetGeneration()
	if v, ok := p.nodes.m.Load(h); ok {
		if e := v.(*encodedNode); e.gen == gen {
			return e.entry
		}
	}
	msg := convert.NodeInfo(h, ni, p.info.WantsPods)
	size := msg.SizeVT()
	entry := make([]byte, 0, size+6)
	entry = append(entry, 0x0a) // NodeSync.upserts, field 1, length-delimited
	entry = appendVarint(entry, uint64(size))
	entry = entry[:len(entry)+size]
	if _, err := msg.MarshalToSizedBufferVT(entry[len(entry)-size:]); err != nil {
		panic(err)
	}
	p.nodes.m.Store(h, &encodedNode{gen: gen, entry: entry})
	return entry
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// maxSyncBatch bounds one NodeSync request.
const maxSyncBatch = 4 << 20

// holds reports whether m holds ni, under handle h, at its generation.
func (m *member) holds(h int32, ni fwk.NodeInfo) bool {
	return int(h) < len(m.gens) && m.gens[h] == ni.GetGeneration()
}

// nodeNotFound is the error for a call about a node the snapshot lacks.
func (p *Policy) nodeNotFound() error {
	return &engine.CallError{Policy: p.name, Version: p.Version(), Call: "sync", Kind: engine.KindInvalid, Err: fmt.Errorf("node not found")}
}

// syncNode makes sure m holds exactly ni (by generation) under handle h.
func (p *Policy) syncNode(m *member, h int32, ni fwk.NodeInfo) error {
	if m.holds(h, ni) {
		return nil
	}
	return p.sendSync(m, p.encode(h, ni), []int32{h}, []int64{ni.GetGeneration()})
}

func (p *Policy) sendSync(m *member, req []byte, hs []int32, gens []int64) error {
	code, err := m.in.Sync(req)
	if err != nil {
		return err
	}
	if code != abiv1.Code_CODE_SUCCESS {
		m.in.MarkBroken() // its snapshot is now unknown
		return p.detailError(m, "sync", code)
	}
	p.stats.nodesSent.Add(int64(len(hs)))
	for i, h := range hs {
		if int(h) >= len(m.gens) {
			grown := make([]int64, max(int(h)+1, 2*len(m.gens)))
			copy(grown, m.gens)
			m.gens = grown
		}
		m.gens[h] = gens[i]
	}
	return nil
}

// syncNodes makes sure m holds each of nodes at its generation, sending
// the changed ones in as few requests as the batch bound allows, and
// returns their handles in the order of nodes.
func (p *Policy) syncNodes(m *member, nodes []fwk.NodeInfo) ([]int32, error) {
	var (
		req  []byte
		hs   []int32
		gens []int64
	)
	flush := func() error {
		if len(req) == 0 {
			return nil
		}
		err := p.sendSync(m, req, hs, gens)
		req, hs, gens = req[:0], hs[:0], gens[:0]
		return err
	}
	handles := make([]int32, len(nodes))
	for i, ni := range nodes {
		if ni == nil || ni.Node() == nil {
			return nil, p.nodeNotFound()
		}
		h := m.handle(&p.handles, ni.Node().Name)
		handles[i] = h
		if m.holds(h, ni) {
			continue
		}
		e := p.encode(h, ni)
		if len(req)+len(e) > maxSyncBatch {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		req = append(req, e...)
		hs = append(hs, h)
		gens = append(gens, ni.GetGeneration())
	}
	return handles, flush()
}

// syncAll brings m's snapshot to exactly the cycle's nodes: changed nodes are
// sent, vanished ones removed, in as few requests as the batch bound allows.
func (p *Policy) syncAll(m *member, nodes []fwk.NodeInfo) error {
	present := make([]fwk.NodeInfo, 0, len(nodes))
	for _, ni := range nodes {
		if ni.Node() != nil {
			present = append(present, ni)
		}
	}
	handles, err := p.syncNodes(m, present)
	if err != nil {
		return err
	}
	keep := make(map[int32]bool, len(handles))
	for _, h := range handles {
		keep[h] = true
	}
	var removed abiv1.NodeSync
	for h, g := range m.gens {
		if g != 0 && !keep[int32(h)] {
			removed.Removed = append(removed.Removed, int32(h))
		}
	}
	if len(removed.Removed) > 0 {
		code, err := m.in.Sync(engine.Marshal(&removed))
		if err != nil {
			return err
		}
		if code != abiv1.Code_CODE_SUCCESS {
			return p.detailError(m, "sync", code)
		}
		for _, h := range removed.Removed {
			m.gens[h] = 0
		}
	}
	return nil
}

// prepare installs the cycle on m: the full snapshot first when the policy
// wants all nodes, then the pod (which runs the guest's PreFilter).
func (p *Policy) prepare(m *member, c *Cycle) error {
	if m.cycle == c.ID {
		return nil
	}
	if p.info.WantsAllNodes && !c.released.Load() {
		if err := p.syncAll(m, c.Nodes); err != nil {
			return err
		}
	}
	m.cycle = 0
	p.stats.podsSent.Add(1)
	code, err := m.in.Cycle(c.request())
	if err != nil {
		return err
	}
	m.cycle, m.cycleCode = c.ID, code
	return nil
}

// detailError fetches the reasons of an unexpected non-success code.
func (p *Policy) detailError(m *member, call string, code abiv1.Code) error {
	r, err := m.in.Result(call)
	if err != nil {
		return err
	}
	return &engine.CallError{Policy: p.name, Version: p.Version(), Call: call, Kind: engine.KindInvalid,
		Err: fmt.Errorf("guest answered %s: %v", CodeName(code), r.GetReasons())}
}
