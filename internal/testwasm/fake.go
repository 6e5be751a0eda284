package testwasm

import "math/rand/v2"

// FakeModule returns n bytes standing in for a module where only the
// bytes matter (not a valid module): deterministic, the same seed giving
// the same bytes, and partly compressible, as real modules are.
func FakeModule(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		if i%4 == 0 {
			b[i] = byte(r.Uint32())
		} else {
			b[i] = byte(i / 64)
		}
	}
	return b
}
