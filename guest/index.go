package guest

import (
	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// nodeIndex is a flat copy of what policies read most often from a node:
// its resource amounts and its labels. The SDK builds it when the host
// syncs the node. Read through the decoded message, one resource amount
// follows five pointers (NodeInfo, Node, Resources, the scalar list, the
// scalar) and compares names in scattered memory; over a few hundred nodes
// per call those are cache misses, and they were most of the cost of
// scoring a node. Here the amounts sit in the NodeInfo itself and the
// labels in one array whose keys are shared by all nodes.
type nodeIndex struct {
	built bool
	// alloc and req are allocatable and requested cpu (milli), memory,
	// ephemeral-storage and pods.
	alloc, req [4]int64
	scalars    []scalarAmount // sorted by name
	labels     []label        // sorted by key
}

type scalarAmount struct {
	name       string
	alloc, req int64
}

type label struct{ key, value string }

// maxInterned bounds the strings an instance shares between nodes, so that
// a cluster with ever new label keys cannot grow it without end; past the
// bound, new strings are simply not shared.
const maxInterned = 4096

// intern returns the instance's shared copy of s.
func (in *instance) intern(s string) string {
	if v, ok := in.interned[s]; ok {
		return v
	}
	if in.interned == nil {
		in.interned = map[string]string{}
	}
	if len(in.interned) < maxInterned {
		in.interned[s] = s
	}
	return s
}

// newNodeInfo wraps a synced node with its index.
func (in *instance) newNodeInfo(ni *abiv1.NodeInfo) *NodeInfo {
	n := &NodeInfo{msg: ni}
	x := &n.index
	x.setAmounts(in, ni.GetNode().GetAllocatable(), ni.GetRequested())
	if ls := ni.GetNode().GetLabels(); len(ls) > 0 {
		x.labels = make([]label, len(ls))
		for i, kv := range ls {
			x.labels[i] = label{key: in.intern(kv.GetKey()), value: kv.GetValue()}
		}
		sortBy(x.labels, func(l label) string { return l.key })
	}
	x.built = true
	return n
}

// withUsage returns a new view of n with the generation, requested amounts
// and pod count of u; the node object and the labels are n's. n itself is
// left as it was: a policy may still hold it.
func (in *instance) withUsage(n *NodeInfo, u *abiv1.NodeUsage) *NodeInfo {
	ni := &abiv1.NodeInfo{
		Handle:     n.msg.GetHandle(),
		Generation: u.GetGeneration(),
		Node:       n.msg.GetNode(),
		Requested:  u.GetRequested(),
		PodCount:   u.GetPodCount(),
	}
	if ni.Requested == nil {
		ni.Requested = &abiv1.Resources{}
	}
	m := &NodeInfo{msg: ni}
	if !n.index.built {
		return m
	}
	x := &m.index
	x.labels = n.index.labels
	x.alloc = n.index.alloc
	x.req = [4]int64{ni.Requested.GetMilliCpu(), ni.Requested.GetMemory(), ni.Requested.GetEphemeralStorage(), ni.Requested.GetPods()}
	rs := ni.Requested.GetScalars()
	if len(n.index.scalars)+len(rs) > 0 {
		// The allocatable side is the node's and unchanged.
		x.scalars = make([]scalarAmount, 0, len(n.index.scalars)+len(rs))
		for _, s := range n.index.scalars {
			if s.alloc != 0 {
				x.scalars = append(x.scalars, scalarAmount{name: s.name, alloc: s.alloc})
			}
		}
		x.addRequested(in, rs)
	}
	x.built = true
	return m
}

// setAmounts fills the resource amounts of the index from a node's
// allocatable and requested resources.
func (x *nodeIndex) setAmounts(in *instance, a, r *abiv1.Resources) {
	x.alloc = [4]int64{a.GetMilliCpu(), a.GetMemory(), a.GetEphemeralStorage(), a.GetPods()}
	x.req = [4]int64{r.GetMilliCpu(), r.GetMemory(), r.GetEphemeralStorage(), r.GetPods()}
	if len(a.GetScalars())+len(r.GetScalars()) == 0 {
		return
	}
	x.scalars = make([]scalarAmount, 0, len(a.GetScalars())+len(r.GetScalars()))
	for _, s := range a.GetScalars() {
		x.scalars = append(x.scalars, scalarAmount{name: in.intern(s.GetName()), alloc: s.GetValue()})
	}
	x.addRequested(in, r.GetScalars())
}

// addRequested sets the requested amounts of scalars, adding the ones the
// node does not list as allocatable, and sorts the scalars by name.
func (x *nodeIndex) addRequested(in *instance, rs []*abiv1.Scalar) {
	for _, s := range rs {
		if i := findScalar(x.scalars, s.GetName()); i >= 0 {
			x.scalars[i].req = s.GetValue()
		} else {
			x.scalars = append(x.scalars, scalarAmount{name: in.intern(s.GetName()), req: s.GetValue()})
		}
	}
	sortBy(x.scalars, func(s scalarAmount) string { return s.name })
}

func findScalar(s []scalarAmount, name string) int {
	for i := range s {
		if s[i].name == name {
			return i
		}
	}
	return -1
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

// amounts returns the allocatable and requested amounts of a resource.
func (n *NodeInfo) amounts(name string) (alloc, req int64) {
	x := &n.index
	if !x.built {
		return Quantity(n.msg.GetNode().GetAllocatable(), name), Quantity(n.msg.GetRequested(), name)
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
		if s := &x.scalars[i]; s.name == name {
			return s.alloc, s.req
		}
	}
	return 0, 0
}

// label returns the value of a node label.
func (n *NodeInfo) label(key string) (string, bool) {
	x := &n.index
	if !x.built {
		return Lookup(n.msg.GetNode().GetLabels(), key)
	}
	ls := x.labels
	lo, hi := 0, len(ls)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if ls[mid].key < key {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(ls) && ls[lo].key == key {
		return ls[lo].value, true
	}
	return "", false
}
