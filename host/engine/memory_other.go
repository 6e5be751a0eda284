//go:build !linux

package engine

import "github.com/tetratelabs/wazero/experimental"

// newMemoryAllocator returns nil: linear memories are wazero's own, in the
// Go heap (memory_linux.go reserves them outside it).
func newMemoryAllocator(*Instance) experimental.MemoryAllocator { return nil }
