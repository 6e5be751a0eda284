package policy

import v1 "k8s.io/api/core/v1"

// NodeSlots remembers a value per position of a node list together with the
// node object it was found for. The scheduler's batch rescore passes the
// same nodes as the call before it, nearly in the same order (about 500 a
// batched pod at 5000 nodes), so comparing the node object at a position
// answers most lookups without reading the node. A slot stays true as long
// as it is kept when its value depends only on the node object's name,
// which never changes. Not safe for concurrent use.
type NodeSlots[V any] struct {
	slots []nodeSlot[V]
}

type nodeSlot[V any] struct {
	node *v1.Node
	v    V
}

// At returns the value for n at position i of a list walked from 0: the
// kept one when the slot holds n, else miss(n), which the slot then keeps.
func (s *NodeSlots[V]) At(i int, n *v1.Node, miss func(*v1.Node) V) V {
	if i < len(s.slots) && s.slots[i].node == n {
		return s.slots[i].v
	}
	v := miss(n)
	if i < len(s.slots) {
		s.slots[i] = nodeSlot[V]{node: n, v: v}
	} else {
		s.slots = append(s.slots, nodeSlot[V]{node: n, v: v})
	}
	return v
}
