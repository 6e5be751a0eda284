package main

import (
	"unsafe"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

var buf []byte

//go:wasmexport buf
func getBuf(n uint32) unsafe.Pointer { buf = make([]byte, n); return unsafe.Pointer(&buf[0]) }

//go:wasmexport decode
func decode(iters uint32) uint32 {
	var ok uint32
	for i := uint32(0); i < iters; i++ {
		var m abiv1.CycleRequest
		if m.UnmarshalVT(buf) == nil {
			ok++
		}
	}
	return ok
}

//go:wasmexport decodenode
func decodeNode(iters uint32) uint32 {
	var ok uint32
	for i := uint32(0); i < iters; i++ {
		var m abiv1.NodeSync
		if m.UnmarshalVT(buf) == nil {
			ok++
		}
	}
	return ok
}

func main() {}
