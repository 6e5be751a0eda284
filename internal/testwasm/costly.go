package testwasm

import (
	"fmt"
	"os"
	"time"
)

// CostlyModule returns a module of n functions, each a block and a
// br_table, and nothing else: within the engine's structural limits, but
// a few seconds and a few hundred MB to compile at n = 100000 (wazero's
// compile cost grows with the number of functions). It has
// none of the ABI's exports, which only a compiled module can tell, so a
// load that compiles it to the end is refused for that. The same n gives
// the same bytes within a test process, so a test can tell whether the
// compilation cache holds it; a custom section private to the process
// keeps it out of the compiled code other processes share
// ($WASMSCHED_TEST_COMPILED), so that a test of a compile abandoned or
// refused never finds it compiled by another.
func CostlyModule(n int) []byte {
	bin := []byte("\x00asm\x01\x00\x00\x00")
	bin = append(bin, section(1, []byte{1, 0x60, 0, 0})...) // one type: () -> ()
	funcs := uleb(nil, uint32(n))
	body := []byte{0, 0x02, 0x40, 0x41, 0x00, 0x0e, 0x01, 0x00, 0x00, 0x0b, 0x0b}
	code := uleb(nil, uint32(n))
	for range n {
		funcs = append(funcs, 0)
		code = append(uleb(code, uint32(len(body))), body...)
	}
	bin = append(bin, section(3, funcs)...)
	bin = append(bin, section(10, code)...)
	name := []byte("wasmsched-test-process")
	return append(bin, section(0, append(append(uleb(nil, uint32(len(name))), name...), processNonce...))...)
}

// processNonce tells this test process from every other of the run.
var processNonce = fmt.Appendf(nil, "%d-%d", os.Getpid(), time.Now().UnixNano())

func uleb(b []byte, v uint32) []byte {
	for ; v >= 0x80; v >>= 7 {
		b = append(b, byte(v)|0x80)
	}
	return append(b, byte(v))
}

func section(id byte, body []byte) []byte {
	return append(uleb([]byte{id}, uint32(len(body))), body...)
}
