// Command recurse is a test policy whose Filter recurses without end. It
// builds with Go and with TinyGo: the host must report the overflow as a
// stack overflow either way (a Go guest runs into the host's limit on the
// wasm call stack, a TinyGo guest into its own stack in linear memory).
package main

import "github.com/wasmsched/wasmsched/guest"

// recurse never returns; its frame holds a little state so that the
// compiler keeps it a real call.
//
//go:noinline
func recurse(n int) int {
	var pad [8]int
	pad[n%8] = n
	return recurse(n+1) + pad[(n+3)%8]
}

func init() {
	guest.Register(&guest.Policy{Name: "recurse", Filter: func(*guest.Cycle, *guest.NodeInfo) guest.Status {
		return guest.Reject("recurse: %d deep", recurse(0))
	}})
}

func main() {}
