package policy

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"google.golang.org/protobuf/encoding/protowire"

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
	// Group is the PodGroup the pod names, with its member counts, sent to
	// policies that declare wants_pod_groups; GroupCycle is set when the
	// cycle is part of a pod-group cycle (group.go). Set both before the
	// cycle's first call.
	Group      *abiv1.PodGroup
	GroupCycle *abiv1.GroupCycle
	groupOnce  sync.Once
	groupField []byte

	// msg is the pod converted, once; req the CycleRequest with it whole,
	// encoded once, for policies sent whole pods.
	msgOnce, reqOnce sync.Once
	msg              *abiv1.Pod
	req              []byte
	// views are the pod encoded for policies that declared what they read
	// of it (policy.view), by view.
	views sync.Map // *podView -> []byte
	// sigs are the pod's signatures, by view (memo.go).
	sigs sync.Map // *podView -> string
	// final holds the versions whose guest flagged the cycle's raw scores
	// final when the cycle was installed (Policy.ScoresFinal).
	final sync.Map // *Policy -> struct{}

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

// podMessage is the cycle's pod converted to the ABI, once. The message is
// only read afterwards (strip shares its parts).
func (c *Cycle) podMessage() *abiv1.Pod {
	c.msgOnce.Do(func() { c.msg = convert.Pod(c.Pod) })
	return c.msg
}

// request is the cycle's CycleRequest for a policy that declared view of
// the pod (nil: the whole pod), encoded once per view.
func (c *Cycle) request(view *podView) []byte {
	if view == nil {
		c.reqOnce.Do(func() {
			c.req = engine.Marshal(&abiv1.CycleRequest{Cycle: c.ID, Pod: c.podMessage(), GroupCycle: c.GroupCycle})
		})
		return c.req
	}
	if b, ok := c.views.Load(view); ok {
		return b.([]byte)
	}
	pod := view.strip(c.podMessage(), true)
	b, _ := c.views.LoadOrStore(view, engine.Marshal(&abiv1.CycleRequest{Cycle: c.ID, Pod: pod, GroupCycle: c.GroupCycle}))
	return b.([]byte)
}

// encodedNode is a node encoded as one NodeSync entry (field tag and length
// included), so NodeSync requests are built by concatenation and every
// instance gets the bytes encoded once.
type encodedNode struct {
	gen   int64
	entry []byte
	// content, for a usage entry, identifies what it tells the guest
	// besides the node's handle and generation (requested, pod count):
	// consecutive usage entries of a node with equal content share it
	// (sameContent). 0 for whole entries.
	content uint64
}

// contentIDs numbers the distinct contents of usage entries.
var contentIDs atomic.Uint64

// nodeCache keeps the last encoding of each node, by handle.
type nodeCache struct{ m sync.Map } // int32 -> *encodedNode

// NodeSync's fields, as the tag byte of a length-delimited entry.
const (
	tagUpsert = 1<<3 | 2
	tagUsage  = 3<<3 | 2
)

// cached returns c's encoding of node h at generation gen, making it with
// msg if c has none.
func (c *nodeCache) cached(h int32, gen int64, tag byte, msg func() sizedMessage) *encodedNode {
	var prev *encodedNode
	if v, ok := c.m.Load(h); ok {
		if prev = v.(*encodedNode); prev.gen == gen {
			return prev
		}
	}
	m := msg()
	size := m.SizeVT()
	entry := make([]byte, 0, size+6)
	entry = append(entry, tag)
	entry = protowire.AppendVarint(entry, uint64(size))
	entry = entry[:len(entry)+size]
	if _, err := m.MarshalToSizedBufferVT(entry[len(entry)-size:]); err != nil {
		panic(err)
	}
	e := &encodedNode{gen: gen, entry: entry}
	if tag == tagUsage {
		if prev != nil && sameContent(prev.entry, entry) {
			e.content = prev.content
		} else {
			e.content = contentIDs.Add(1)
		}
	}
	c.m.Store(h, e)
	return e
}

// sameContent reports whether two usage entries (tag and length included)
// tell the guest the same once their handle and generation (NodeUsage's
// fields 1 and 2, which the encoding puts first) are left out. Entries
// whose other fields are not all after those two never compare equal.
func sameContent(a, b []byte) bool {
	return bytes.Equal(usageContent(a), usageContent(b))
}

// usageContent is a usage entry's fields after its leading handle and
// generation; the whole entry when it cannot be read so.
func usageContent(entry []byte) []byte {
	_, n := protowire.ConsumeVarint(entry[1:])
	if n < 0 {
		return entry
	}
	b := entry[1+n:]
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || (num != 1 && num != 2) {
			break
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return entry
		}
		b = b[n+m:]
	}
	return b
}

type sizedMessage interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
}

// encode returns ni whole, as an upsert.
func (p *Policy) encode(h int32, ni fwk.NodeInfo) *encodedNode {
	return p.nodes.cached(h, ni.GetGeneration(), tagUpsert, func() sizedMessage {
		return convert.NodeInfo(h, ni, p.info.WantsPods)
	})
}

// encodeUsage returns ni's usage update.
func (p *Policy) encodeUsage(h int32, ni fwk.NodeInfo) *encodedNode {
	return p.usages.cached(h, ni.GetGeneration(), tagUsage, func() sizedMessage {
		return convert.NodeUsage(h, ni)
	})
}

// maxSyncBatch bounds one NodeSync request.
const maxSyncBatch = 4 << 20

// holds reports whether m holds ni, under handle h, at its generation.
func (m *member) holds(h int32, ni fwk.NodeInfo) bool {
	return int(h) < len(m.gens) && m.gens[h] == ni.GetGeneration()
}

// nodeNotFound is the error for a call about a node the snapshot lacks.
func (p *Policy) nodeNotFound() error {
	return p.CallError("sync", engine.KindInvalid, fmt.Errorf("node not found"))
}

// syncBatch is a NodeSync request being built: its entries and what m will
// hold once the guest applied it.
type syncBatch struct {
	req  []byte
	hs   []int32
	gens []int64
	// objs are the node objects of whole entries; nil for usage entries,
	// which leave the object as it was. contents are the usage entries'
	// content ids, 0 for whole entries.
	objs     []*v1.Node
	contents []uint64
	usage    int
}

// entry returns what brings m to ni under handle h: a usage update when m
// holds the same node object at another generation and the guest applies
// those (obj is nil then), ni whole otherwise (obj is its node object).
// Unchanged is set when m holds that usage already, under another
// generation (a pod assumed on the node and then confirmed by the API
// server changes the generation twice and the usage once): nothing need be
// sent, m now holds ni at its generation.
func (p *Policy) entry(m *member, h int32, ni fwk.NodeInfo) (e *encodedNode, obj *v1.Node, unchanged bool) {
	if p.usage && int(h) < len(m.objs) && m.objs[h] != nil && m.objs[h] == ni.Node() {
		e = p.encodeUsage(h, ni)
		if m.contents[h] == e.content {
			m.gens[h] = ni.GetGeneration()
			p.stats.usageUnchanged.Add(1)
			return e, nil, true
		}
		return e, nil, false
	}
	return p.encode(h, ni), ni.Node(), false
}

func (b *syncBatch) add(h int32, gen int64, e *encodedNode, obj *v1.Node) {
	b.req = append(b.req, e.entry...)
	b.hs = append(b.hs, h)
	b.gens = append(b.gens, gen)
	b.objs = append(b.objs, obj)
	b.contents = append(b.contents, e.content)
	if obj == nil {
		b.usage++
	}
}

func (b *syncBatch) reset() {
	b.req, b.hs, b.gens, b.objs, b.contents, b.usage = b.req[:0], b.hs[:0], b.gens[:0], b.objs[:0], b.contents[:0], 0
}

// syncNode makes sure m holds exactly ni (by generation) under handle h.
func (p *Policy) syncNode(m *member, h int32, ni fwk.NodeInfo) error {
	if m.holds(h, ni) {
		return nil
	}
	e, obj, unchanged := p.entry(m, h, ni)
	if unchanged {
		return nil
	}
	var b syncBatch
	b.add(h, ni.GetGeneration(), e, obj)
	return p.sendSync(m, &b)
}

func (p *Policy) sendSync(m *member, b *syncBatch) error {
	code, err := m.in.Sync(b.req)
	if err != nil {
		return err
	}
	if code != abiv1.Code_CODE_SUCCESS {
		m.in.MarkBroken() // its snapshot is now unknown
		return p.detailError(m, "sync", code)
	}
	p.stats.nodesSent.Add(int64(len(b.hs) - b.usage))
	p.stats.usageSent.Add(int64(b.usage))
	for i, h := range b.hs {
		if int(h) >= len(m.gens) {
			n := max(int(h)+1, 2*len(m.gens))
			m.gens = append(m.gens, make([]int64, n-len(m.gens))...)
			m.objs = append(m.objs, make([]*v1.Node, n-len(m.objs))...)
			m.contents = append(m.contents, make([]uint64, n-len(m.contents))...)
		}
		m.gens[h], m.contents[h] = b.gens[i], b.contents[i]
		if b.objs[i] != nil {
			m.objs[h] = b.objs[i]
		}
	}
	return nil
}

// syncNodes makes sure m holds each of nodes at its generation, sending
// the changed ones in as few requests as the batch bound allows, and
// returns their handles in the order of nodes.
func (p *Policy) syncNodes(m *member, nodes []fwk.NodeInfo) ([]int32, error) {
	var b syncBatch
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
		e, obj, unchanged := p.entry(m, h, ni)
		if unchanged {
			continue
		}
		if len(b.req) > 0 && len(b.req)+len(e.entry) > maxSyncBatch {
			if err := p.sendSync(m, &b); err != nil {
				return nil, err
			}
			b.reset()
		}
		b.add(h, ni.GetGeneration(), e, obj)
	}
	if len(b.req) == 0 {
		return handles, nil
	}
	return handles, p.sendSync(m, &b)
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
			m.gens[h], m.objs[h], m.contents[h] = 0, nil, 0
		}
	}
	return nil
}

// prepare installs the cycle on m: the full snapshot first when the policy
// wants all nodes, what changed in the cluster objects and tenant usage it
// reads, then the pod (which runs the guest's PreFilter). Every cycle thus
// sees context current as of its start.
func (p *Policy) prepare(m *member, c *Cycle) error {
	if m.cycle == c.ID {
		return nil
	}
	if p.info.WantsAllNodes && !c.released.Load() {
		if err := p.syncAll(m, c.Nodes); err != nil {
			return err
		}
	}
	if p.context {
		if err := p.syncContext(m); err != nil {
			return err
		}
	}
	m.cycle = 0
	p.stats.podsSent.Add(1)
	code, flags, err := m.in.Cycle(c.requestFor(p))
	if err != nil {
		return err
	}
	m.cycle, m.cycleCode, m.scoresFinal, m.noDetail = c.ID, code, flags.ScoresFinal(), flags.NoDetail()
	if m.scoresFinal {
		c.final.Store(p, struct{}{})
	}
	return nil
}

// ScoresFinal reports whether the guest said, when the cycle was installed
// on one of its instances, that the cycle's raw scores are final
// (CYCLE_FLAG_SCORES_FINAL, the SDK's Cycle.SkipNormalizeScore):
// NormalizeScore would leave them as they are and need not be called.
func (p *Policy) ScoresFinal(c *Cycle) bool {
	_, ok := c.final.Load(p)
	return ok
}

// detailError fetches the reasons of an unexpected non-success code.
func (p *Policy) detailError(m *member, call string, code abiv1.Code) error {
	r, err := m.in.Result(call)
	if err != nil {
		return err
	}
	return p.CallError(call, engine.KindInvalid, fmt.Errorf("guest answered %s: %v", CodeName(code), r.GetReasons()))
}
