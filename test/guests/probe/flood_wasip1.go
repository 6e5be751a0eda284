//go:build wasip1

package main

import "unsafe"

//go:wasmimport wasi_snapshot_preview1 fd_write
//go:noescape
func fdWrite(fd int32, iovs unsafe.Pointer, n int32, written unsafe.Pointer) int32

// floodStderr writes buf to stderr n times in one fd_write: n iovecs that
// all point at buf.
func floodStderr(buf []byte, n int) {
	iovs := make([]uint32, 2*n)
	for i := 0; i < n; i++ {
		iovs[2*i] = uint32(uintptr(unsafe.Pointer(&buf[0])))
		iovs[2*i+1] = uint32(len(buf))
	}
	var written uint32
	fdWrite(2, unsafe.Pointer(&iovs[0]), int32(n), unsafe.Pointer(&written))
}
