package guest

import (
	"unsafe"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// nodeIndex is what the SDK keeps of a resident node for the methods
// policies call most: its name, generation, pod count, resource amounts and
// labels, flat and free of pointers. Read through the decoded message, one
// resource amount follows five pointers (NodeInfo, Node, Resources, the
// scalar list, the scalar) and compares names in scattered memory; over a
// few hundred nodes per call those are cache misses, and they were most of
// the cost of scoring a node.
//
// The strings live in one byte array per node (text: for a synced node its
// encoding itself, wire.go) and the lists hold offsets into it, so that
// every array here is allocated without pointers.
// A garbage collector skips such an object without reading it: TinyGo's
// marks each heap object one by one, and with 5000 decoded nodes resident
// (some forty objects each) one collection took longer than a call's
// deadline on a busy machine (RATIONALE.md). The decoded message is made
// only when a method needs what the index does not hold (NodeInfo.Message).
type nodeIndex struct {
	built bool
	// generation and podCount are the node's, or the last usage update's.
	generation int64
	podCount   int32
	// alloc and req are allocatable and requested cpu (milli), memory,
	// ephemeral-storage and pods.
	alloc, req [4]int64
	// text holds the node's name, its label keys and values and the names
	// of its scalar resources, which the spans below point into. It is
	// never written after the index is built; a usage update that names a
	// new scalar makes a longer copy.
	text    []byte
	name    span
	scalars []scalarAmount // sorted by name
	labels  []label        // sorted by key
}

// span is a string inside nodeIndex.text.
type span struct{ off, len uint32 }

type scalarAmount struct {
	name       span
	alloc, req int64
}

type label struct{ key, value span }

// str returns the string s of the index's text, without copying: the text
// is never written once built.
func (x *nodeIndex) str(s span) string {
	if s.len == 0 {
		return ""
	}
	return unsafe.String(&x.text[s.off], int(s.len))
}

// add appends s to the text being built and returns its span.
func (x *nodeIndex) add(s string) span {
	sp := span{off: uint32(len(x.text)), len: uint32(len(s))}
	x.text = append(x.text, s...)
	return sp
}

// newNodeInfo wraps a synced node with its index. raw is the node's
// encoding, owned by the view (nil for a view of a message alone, as
// NewNodeInfo makes); with raw, the message is dropped unless keep is set,
// and decoded again from raw when a method needs it.
func newNodeInfo(ni *abiv1.NodeInfo, raw []byte, keep bool) *NodeInfo {
	n := &NodeInfo{msg: ni, raw: raw, handle: ni.GetHandle()}
	x := &n.index
	x.generation, x.podCount = ni.GetGeneration(), ni.GetPodCount()
	node := ni.GetNode()
	a, r := node.GetAllocatable(), ni.GetRequested()
	size := len(node.GetName())
	for _, kv := range node.GetLabels() {
		size += len(kv.GetKey()) + len(kv.GetValue())
	}
	for _, s := range a.GetScalars() {
		size += len(s.GetName())
	}
	for _, s := range r.GetScalars() {
		size += len(s.GetName())
	}
	x.text = make([]byte, 0, size)
	x.name = x.add(node.GetName())
	if ls := node.GetLabels(); len(ls) > 0 {
		x.labels = make([]label, len(ls))
		for i, kv := range ls {
			x.labels[i] = label{key: x.add(kv.GetKey()), value: x.add(kv.GetValue())}
		}
		x.sortLabels()
	}
	x.alloc = [4]int64{a.GetMilliCpu(), a.GetMemory(), a.GetEphemeralStorage(), a.GetPods()}
	x.req = [4]int64{r.GetMilliCpu(), r.GetMemory(), r.GetEphemeralStorage(), r.GetPods()}
	if len(a.GetScalars())+len(r.GetScalars()) > 0 {
		x.scalars = make([]scalarAmount, 0, len(a.GetScalars())+len(r.GetScalars()))
		for _, s := range a.GetScalars() {
			x.scalars = append(x.scalars, scalarAmount{name: x.add(s.GetName()), alloc: s.GetValue()})
		}
		x.addRequested(r.GetScalars())
	}
	x.built = true
	if raw != nil && !keep {
		n.msg = nil
	}
	return n
}

// withUsage returns a new view of n with the generation, requested amounts
// and pod count of u, whose encoding is raw; the node object and the
// labels are n's. n itself is left as it was: a policy may still hold it.
func withUsage(n *NodeInfo, u *abiv1.NodeUsage, raw []byte, keep bool) *NodeInfo {
	m := &NodeInfo{raw: n.raw, usage: raw, handle: n.handle}
	if keep || n.raw == nil {
		m.msg = usageMessage(n.Message(), u)
	}
	if !n.index.built {
		return m
	}
	x := &m.index
	x.generation, x.podCount = u.GetGeneration(), u.GetPodCount()
	// The text is shared, capped so that a name added copies it.
	t := n.index.text
	x.text, x.name, x.labels = t[:len(t):len(t)], n.index.name, n.index.labels
	x.alloc = n.index.alloc
	rq := u.GetRequested()
	x.req = [4]int64{rq.GetMilliCpu(), rq.GetMemory(), rq.GetEphemeralStorage(), rq.GetPods()}
	rs := rq.GetScalars()
	if len(n.index.scalars)+len(rs) > 0 {
		// The allocatable side is the node's and unchanged.
		x.scalars = make([]scalarAmount, 0, len(n.index.scalars)+len(rs))
		for _, s := range n.index.scalars {
			if s.alloc != 0 {
				x.scalars = append(x.scalars, scalarAmount{name: s.name, alloc: s.alloc})
			}
		}
		x.addRequested(rs)
	}
	x.built = true
	return m
}

// usageMessage returns the message of a node with the usage u applied: the
// node object is ni's.
func usageMessage(ni *abiv1.NodeInfo, u *abiv1.NodeUsage) *abiv1.NodeInfo {
	m := &abiv1.NodeInfo{
		Handle:     ni.GetHandle(),
		Generation: u.GetGeneration(),
		Node:       ni.GetNode(),
		Requested:  u.GetRequested(),
		PodCount:   u.GetPodCount(),
	}
	if m.Requested == nil {
		m.Requested = &abiv1.Resources{}
	}
	return m
}

// addRequested sets the requested amounts of scalars, adding the ones the
// node does not list as allocatable, and sorts the scalars by name. The
// names it adds go to the end of the text: a view sharing another's text
// has it with no spare capacity, so that adding copies it.
func (x *nodeIndex) addRequested(rs []*abiv1.Scalar) {
	for _, s := range rs {
		if i := x.findScalar(s.GetName()); i >= 0 {
			x.scalars[i].req = s.GetValue()
			continue
		}
		x.scalars = append(x.scalars, scalarAmount{name: x.add(s.GetName()), req: s.GetValue()})
	}
	x.sortScalars()
}

// sortScalars sorts the scalars by name. Insertion sort: the host sends
// lists sorted already, so this is one pass.
func (x *nodeIndex) sortScalars() {
	s := x.scalars
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && x.str(s[j].name) < x.str(s[j-1].name); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func (x *nodeIndex) sortLabels() {
	s := x.labels
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && x.str(s[j].key) < x.str(s[j-1].key); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func (x *nodeIndex) findScalar(name string) int {
	for i := range x.scalars {
		if x.str(x.scalars[i].name) == name {
			return i
		}
	}
	return -1
}

// amounts returns the allocatable and requested amounts of a resource.
func (n *NodeInfo) amounts(name string) (alloc, req int64) {
	x := &n.index
	if !x.built {
		m := n.Message()
		return Quantity(m.GetNode().GetAllocatable(), name), Quantity(m.GetRequested(), name)
	}
	switch name {
	case ResourceCPU:
		return x.alloc[0], x.req[0]
	case ResourceMemory:
		return x.alloc[1], x.req[1]
	case ResourceEphemeralStorage:
		return x.alloc[2], x.req[2]
	case ResourcePods:
		return x.alloc[3], x.req[3]
	}
	for i := range x.scalars {
		if s := &x.scalars[i]; x.str(s.name) == name {
			return s.alloc, s.req
		}
	}
	return 0, 0
}

// label returns the value of a node label.
func (n *NodeInfo) label(key string) (string, bool) {
	x := &n.index
	if !x.built {
		return Lookup(n.Message().GetNode().GetLabels(), key)
	}
	ls := x.labels
	lo, hi := 0, len(ls)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if x.str(ls[mid].key) < key {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(ls) && x.str(ls[lo].key) == key {
		return x.str(ls[lo].value), true
	}
	return "", false
}

// sortBy sorts a short slice by a string key (insertion sort: the host
// sends lists sorted already, so this is one pass).
func sortBy[T any](s []T, key func(T) string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && key(s[j]) < key(s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
