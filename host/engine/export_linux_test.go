package engine

import "unsafe"

// ReservedBytes is the address space reserved for linear memories now.
func ReservedBytes() int64 { return reservedBytes.Load() }

// MemoryBase is the address of the first byte of in's linear memory.
func MemoryBase(in *Instance) uintptr {
	b, _ := in.mem.Read(0, 1)
	return uintptr(unsafe.Pointer(&b[0]))
}

// MemoryByte and SetMemoryByte read and write a byte of in's linear memory.
func MemoryByte(in *Instance, off uint32) (byte, bool)    { return in.mem.ReadByte(off) }
func SetMemoryByte(in *Instance, off uint32, b byte) bool { return in.mem.WriteByte(off, b) }

// Mapped reports, without holding in, whether the range reserved for in's
// linear memory is still mapped; nil when in's memory is not a reservation.
func Mapped(in *Instance) func() bool {
	r, ok := in.memory.(*reservation)
	if !ok {
		return nil
	}
	return r.mapped
}
