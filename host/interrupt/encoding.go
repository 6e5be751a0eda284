package interrupt

import (
	"errors"
	"fmt"
)

// skipImmediates advances r past the immediates of op.
func skipImmediates(r *reader, op byte) error {
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
		r.blockType()
	case op == 0x0c || op == 0x0d: // br, br_if
		r.u32()
	case op == 0x0e: // br_table
		n := r.u32()
		for i := uint32(0); i <= n && r.err == nil; i++ {
			r.u32()
		}
	case op == 0x10 || op == 0x12: // call, return_call
		r.u32()
	case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
		r.u32()
		r.u32()
	case op == 0x1c: // select t*
		n := r.u32()
		for i := uint32(0); i < n && r.err == nil; i++ {
			r.valType()
		}
	case op >= 0x20 && op <= 0x26: // local.*, global.*, table.get/set
		r.u32()
	case op >= 0x28 && op <= 0x3e: // loads and stores
		r.u32()
		r.u32()
	case op == 0x3f || op == 0x40: // memory.size, memory.grow
		r.byte()
	case op == 0x41:
		r.s64()
	case op == 0x42:
		r.s64()
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xd0: // ref.null
		r.s64() // heap type
	case op == 0xd2: // ref.func
		r.u32()
	case op == 0xfc:
		return skipFC(r, r.u32())
	case op == 0xfd:
		return skipSIMD(r, r.u32())
	case op == 0xfe:
		if sub := r.u32(); sub == 0x03 { // atomic.fence
			r.byte()
		} else {
			r.u32()
			r.u32()
		}
	case op <= 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b ||
		(op >= 0x45 && op <= 0xc4) || op == 0xd1:
		// no immediates
	default:
		return errors.New("unknown opcode")
	}
	return nil
}

func skipFC(r *reader, sub uint32) error {
	switch {
	case sub <= 7: // saturating truncations
	case sub == 8: // memory.init
		r.u32()
		r.byte()
	case sub == 9 || sub == 13 || (sub >= 15 && sub <= 17): // data.drop, elem.drop, table.grow/size/fill
		r.u32()
	case sub == 10: // memory.copy
		r.byte()
		r.byte()
	case sub == 11: // memory.fill
		r.byte()
	case sub == 12 || sub == 14: // table.init, table.copy
		r.u32()
		r.u32()
	default:
		return fmt.Errorf("unknown 0xfc sub-opcode %d", sub)
	}
	return nil
}

func skipSIMD(r *reader, sub uint32) error {
	switch {
	case sub <= 11 || sub == 92 || sub == 93: // loads and stores
		r.u32()
		r.u32()
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		r.bytes(16)
	case sub >= 21 && sub <= 34: // extract and replace lane
		r.byte()
	case sub >= 84 && sub <= 91: // load and store lane
		r.u32()
		r.u32()
		r.byte()
	case sub <= 275:
		// no immediates
	default:
		return fmt.Errorf("unknown 0xfd sub-opcode %d", sub)
	}
	return nil
}

// reader decodes the binary format; the first error sticks and later reads
// return zero values.
type reader struct {
	b   []byte
	pos int
	err error
}

var errEOF = errors.New("unexpected end of data")

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.err = errEOF
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.pos {
		r.err = errEOF
		return nil
	}
	b := r.b[r.pos : r.pos+n]
	r.pos += n
	return b
}

func (r *reader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.err = errors.New("LEB128 value too long")
	return 0
}

func (r *reader) s64() {
	for i := 0; i < 10; i++ {
		if c := r.byte(); r.err != nil || c&0x80 == 0 {
			return
		}
	}
	r.err = errors.New("LEB128 value too long")
}

// s33 reads a signed LEB128 of at most 33 bits: a block type's type index.
func (r *reader) s33() int64 {
	var v int64
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= int64(c&0x7f) << shift
		if c&0x80 == 0 {
			if shift+7 < 64 && c&0x40 != 0 {
				v |= -1 << (shift + 7)
			}
			return v
		}
	}
	r.err = errors.New("LEB128 value too long")
	return 0
}

func (r *reader) name() string {
	return string(r.bytes(int(r.u32())))
}

func (r *reader) limits() {
	flags := r.byte()
	r.u32()
	if flags&0x01 != 0 {
		r.u32()
	}
}

// blockType skips a block type: 0x40, a value type, or an s33 type index,
// which it returns (-1 for the other two forms).
func (r *reader) blockType() int64 {
	if r.pos < len(r.b) {
		if c := r.b[r.pos]; c == 0x40 || (c >= 0x6f && c <= 0x7f) || c == refNull || c == ref {
			r.valType()
			return -1
		}
	}
	idx := r.s33()
	if r.err == nil && idx < 0 {
		r.err = fmt.Errorf("unknown block type %d", idx)
	}
	return idx
}

// Prefixes of the reference types that name a heap type: (ref null ht) and
// (ref ht). wazero decodes (ref null func) and (ref null extern) as funcref
// and externref wherever a value type may appear.
const (
	refNull = 0x63
	ref     = 0x64
)

// valType skips a value type: one byte, or a reference prefix and its s33
// heap type.
func (r *reader) valType() {
	if c := r.byte(); c == refNull || c == ref {
		r.s64()
	}
}

// count reads the length of a vector and fails if the rest of the data
// cannot hold that many entries of at least one byte each.
func (r *reader) count() uint32 {
	n := r.u32()
	if left := len(r.b) - r.pos; r.err == nil && uint64(n) > uint64(left) {
		r.err = fmt.Errorf("vector of %d entries cannot fit in the %d bytes left", n, left)
	}
	return n
}

// constExpr skips a constant expression, up to and including its end.
func (r *reader) constExpr() {
	for r.err == nil {
		op := r.byte()
		if op == 0x0b {
			return
		}
		if err := skipImmediates(r, op); err != nil && r.err == nil {
			r.err = fmt.Errorf("opcode %#x in a constant expression: %w", op, err)
		}
	}
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendName(b []byte, s string) []byte {
	return append(appendU32(b, uint32(len(s))), s...)
}
