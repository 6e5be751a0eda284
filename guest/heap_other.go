//go:build !tinygo

package guest

// headroom does nothing under Go, whose collector paces the heap to twice
// what is live (heap_tinygo.go).
func headroom(int) {}
