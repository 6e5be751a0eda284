//go:build !wasip1

package main

import "os"

// floodStderr writes buf to stderr n times (the probe is only run as
// WebAssembly; this keeps the package building for go vet).
func floodStderr(buf []byte, n int) {
	for range n {
		os.Stderr.Write(buf)
	}
}
