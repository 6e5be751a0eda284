package policy

import (
	"math/bits"
	"unsafe"
)

// handleCache is one member's memory of the handles of the node names it
// looked up last, found by the address of the name's bytes. Looking a name
// up in the shared handleTable hashes it and compares it with the bytes of
// the key stored there, which are scattered over the heap: per node and
// per call, several cache misses, hundreds of nanoseconds when the
// scheduler's data has pushed the table out of the caches. The scheduler
// hands the same node name (the same bytes) to every cycle until the node
// object is replaced, so one load of a slot usually answers. A slot keeps
// its name alive, so no other string can take its address: equal address
// and length mean equal bytes. Only the goroutine holding the member (or
// the score memo's lock) touches it.
type handleCache struct {
	slots []handleSlot
	shift uint // 64 - log2(len(slots))
}

type handleSlot struct {
	name string
	h    int32
}

// handle returns the handle of a node name, from the member's cache or the
// table.
func (m *member) handle(t *handleTable, name string) int32 { return m.handles.get(t, name) }

// get returns the handle of a node name, from the cache or the table.
func (c *handleCache) get(t *handleTable, name string) int32 {
	if len(name) == 0 {
		return t.get(name)
	}
	// Size the cache to twice the number of node names known.
	if want := max(1024, 2*int(t.size())); len(c.slots) < want {
		n := 1 << bits.Len(uint(want-1))
		c.slots = make([]handleSlot, n)
		c.shift = uint(64 - bits.TrailingZeros(uint(n)))
	}
	// Two ways: a name goes to the first slot of its pair and pushes the
	// one there to the second.
	addr := uint64(uintptr(unsafe.Pointer(unsafe.StringData(name))))
	pair := c.slots[(addr*0x9e3779b97f4a7c15)>>c.shift&^1:][:2]
	for i := range pair {
		if s := &pair[i]; len(s.name) == len(name) && unsafe.StringData(s.name) == unsafe.StringData(name) {
			return s.h
		}
	}
	h := t.get(name)
	pair[1] = pair[0]
	pair[0] = handleSlot{name: name, h: h}
	return h
}
