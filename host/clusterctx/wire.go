package clusterctx

// NodeSync's context fields, as the tag byte of a length-delimited entry
// (abi/v1/policy.proto): objects_reset (packed), objects, objects_removed,
// tenant_usage.
const (
	tagObjectsReset   = 4<<3 | 2
	tagObjects        = 5<<3 | 2
	tagObjectsRemoved = 6<<3 | 2
	tagTenantUsage    = 7<<3 | 2
	// tagKind is ContextObject.kind and ObjectRef.kind, a varint.
	tagKind = 1<<3 | 0
)

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func varintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// appendKindEntry appends one length-delimited entry of field tag whose
// message is the kind field (omitted for 0, as proto3 does) followed by
// body, a message encoded without its kind.
func appendKindEntry(dst []byte, tag byte, kindIndex int32, body []byte) []byte {
	kindLen := 0
	if kindIndex != 0 {
		kindLen = 1 + varintLen(uint64(int64(kindIndex)))
	}
	dst = append(dst, tag)
	dst = appendVarint(dst, uint64(kindLen+len(body)))
	if kindIndex != 0 {
		dst = append(dst, tagKind)
		dst = appendVarint(dst, uint64(int64(kindIndex)))
	}
	return append(dst, body...)
}

// appendReset appends objects_reset for kindIndex, packed.
func appendReset(dst []byte, kindIndex int32) []byte {
	v := uint64(int64(kindIndex))
	dst = append(dst, tagObjectsReset)
	dst = appendVarint(dst, uint64(varintLen(v)))
	return appendVarint(dst, v)
}

// SplitEntries cuts a run of NodeSync entries, as the AppendSince methods
// append them, into pieces of at most limit bytes each (a single entry
// larger than limit is a piece of its own), without splitting an entry.
// Every piece is a valid NodeSync on its own, and applying the pieces in
// order has the effect of applying the whole: objects_reset precedes the
// objects it clears, and within one AppendSince each object or tenant
// appears once.
func SplitEntries(entries []byte, limit int) [][]byte {
	var out [][]byte
	start, i := 0, 0
	for i < len(entries) {
		j := i + 1
		var n uint64
		for shift := 0; j < len(entries); shift += 7 {
			c := entries[j]
			j++
			n |= uint64(c&0x7f) << shift
			if c < 0x80 {
				break
			}
		}
		end := j + int(n)
		if end > len(entries) {
			end = len(entries) // malformed: keep the rest whole
		}
		if i > start && end-start > limit {
			out = append(out, entries[start:i])
			start = i
		}
		i = end
	}
	if i > start {
		out = append(out, entries[start:i])
	}
	return out
}
