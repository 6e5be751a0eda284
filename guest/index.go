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
	n := &NodeInfo{NodeInfo: ni}
	x := &n.index
	node := ni.GetNode()
	a, r := node.GetAllocatable(), ni.GetRequested()
	x.alloc = [4]int64{a.GetMilliCpu(), a.GetMemory(), a.GetEphemeralStorage(), a.GetPods()}
	x.req = [4]int64{r.GetMilliCpu(), r.GetMemory(), r.GetEphemeralStorage(), r.GetPods()}
	if len(a.GetScalars())+len(r.GetScalars()) > 0 {
		x.scalars = make([]scalarAmount, 0, len(a.GetScalars())+len(r.GetScalars()))
		for _, s := range a.GetScalars() {
			x.scalars = append(x.scalars, scalarAmount{name: in.intern(s.GetName()), alloc: s.GetValue()})
		}
		for _, s := range r.GetScalars() {
			if i := findScalar(x.scalars, s.GetName()); i >= 0 {
				x.scalars[i].req = s.GetValue()
			} else {
				x.scalars = append(x.scalars, scalarAmount{name: in.intern(s.GetName()), req: s.GetValue()})
			}
		}
		sortBy(x.scalars, func(s scalarAmount) string { return s.name })
	}
	if ls := node.GetLabels(); len(ls) > 0 {
		x.labels = make([]label, len(ls))
		for i, kv := range ls {
			x.labels[i] = label{key: in.intern(kv.GetKey()), value: kv.GetValue()}
		}
		sortBy(x.labels, func(l label) string { return l.key })
	}
	x.built = true
	return n
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
		return Quantity(n.GetNode().GetAllocatable(), name), Quantity(n.GetRequested(), name)
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
		return Lookup(n.GetNode().GetLabels(), key)
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
