package guest

import "testing"

// BenchmarkObjectGet reads three quantities of a ResourceSlice-sized
// object: the first read of each version parses, the others walk the parse.
func BenchmarkObjectGet(b *testing.B) {
	data := []byte(sliceJSON)
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			_ = parseDocument(data)
		}
		b.SetBytes(int64(len(data)))
	})
	b.Run("get", func(b *testing.B) {
		doc := parseDocument(data)
		b.ReportAllocs()
		for range b.N {
			d := doc.root().Get("spec", "devices").Index(1)
			if _, ok := d.Get("capacity", "memory", "value").Quantity(ResourceMemory); !ok {
				b.Fatal("no quantity")
			}
		}
	})
}
