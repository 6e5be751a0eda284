//go:build tinygo

package guest

// headroomSink holds headroom's allocation for as long as it takes to make.
var headroomSink []byte

// headroom makes TinyGo's heap grow by about size bytes after syncs that
// made size bytes of nodes resident (RATIONALE.md, "Why a synced node is indexed
// from its encoding"). TinyGo's collector grows the heap only when a
// collection leaves less than a third of it free: once the nodes fill it,
// every later call collects every few hundred kilobytes it allocates,
// marking the whole snapshot each time. Decoding the nodes used to leave
// that room by accident; one allocation of the size the nodes took asks
// for it, here in the sync, whose deadline is the longer one.
func headroom(size int) {
	headroomSink = make([]byte, size)
	headroomSink = nil
}
