//go:build linux

package engine

import (
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// maxReserve bounds the address space one linear memory reserves (the
// memory limits allowed are far below it); a larger maximum, or a failed
// reservation, falls back to memory in the Go heap.
const maxReserve = 64 << 30

// reservedBytes is the address space reserved for linear memories and not
// yet returned, for tests.
var reservedBytes atomic.Int64

// reservation is a linear memory in address space reserved once, up to the
// memory's maximum, outside the Go heap. Growing it hands out more of the
// reservation: nothing moves and nothing is copied. wazero's own memory is
// a Go slice that memory.grow appends to, copying the whole memory each
// time its capacity runs out and leaving the old one to the collector: at
// an instance's warm-up over 15 000 nodes, an eighth of the CPU, and inside
// the call that grows (RATIONALE.md, "Linear memory outside the Go heap").
//
// The kernel backs a page when the guest first touches it; pages are zero
// until then, as memory.grow requires. Free gives the pages back at once
// (madvise), so a closed instance costs no memory, but keeps the address
// range mapped: wazero frees a memory when its module closes, which a
// Policy's Close may do while a call still runs or a host function still
// reads (ctx expired), and unmapping under them would crash the process,
// where a page given back only reads as zeros. The range is unmapped once
// the Instance that owns it is unreachable: every call and every read of
// the memory goes through it.
type reservation struct {
	mu    sync.Mutex
	mem   []byte // the whole range; nil once unmapped
	freed bool
}

// newMemoryAllocator returns the allocator of in's linear memory and
// arranges for its range to be unmapped when in is unreachable.
func newMemoryAllocator(in *Instance) experimental.MemoryAllocator {
	r := &reservation{}
	in.memory = r
	runtime.AddCleanup(in, (*reservation).unmap, r)
	return experimental.MemoryAllocatorFunc(func(capBytes, maxBytes uint64) experimental.LinearMemory {
		if maxBytes == 0 || maxBytes > maxReserve {
			return &heapMemory{}
		}
		b, err := syscall.Mmap(-1, 0, int(maxBytes), syscall.PROT_READ|syscall.PROT_WRITE,
			syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
		if err != nil {
			return &heapMemory{}
		}
		reservedBytes.Add(int64(len(b)))
		r.mu.Lock()
		r.mem = b
		r.mu.Unlock()
		return r
	})
}

// Reallocate implements experimental.LinearMemory: the first size bytes of
// the range, nil past it (wazero then fails the memory.grow).
func (r *reservation) Reallocate(size uint64) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.freed || r.mem == nil || size > uint64(len(r.mem)) {
		return nil
	}
	return r.mem[:size:size]
}

// Free implements experimental.LinearMemory: the pages go back to the
// kernel; the range stays mapped until unmap.
func (r *reservation) Free() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.freed || r.mem == nil {
		return
	}
	r.freed = true
	_ = syscall.Madvise(r.mem, syscall.MADV_DONTNEED)
}

// mapped reports whether the range is still mapped.
func (r *reservation) mapped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mem != nil
}

// unmap returns the range; it runs once its Instance is unreachable.
func (r *reservation) unmap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mem == nil {
		return
	}
	if syscall.Munmap(r.mem) == nil {
		reservedBytes.Add(-int64(len(r.mem)))
	}
	r.mem = nil
}

// heapMemory is a linear memory in the Go heap, as wazero keeps one, for
// when no range can be reserved: growing past its capacity copies it.
type heapMemory struct{ buf []byte }

func (h *heapMemory) Reallocate(size uint64) []byte {
	if size > uint64(cap(h.buf)) {
		grown := make([]byte, size, max(size, 2*uint64(cap(h.buf))))
		copy(grown, h.buf)
		h.buf = grown
	}
	h.buf = h.buf[:size]
	return h.buf
}

func (h *heapMemory) Free() { h.buf = nil }
