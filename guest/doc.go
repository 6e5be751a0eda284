// Package guest is the SDK a policy author imports to write a wasmsched
// scheduling policy in Go or TinyGo.
//
// A policy is a set of plain Go functions registered once, from an init
// function, with Register:
//
//	func init() {
//		guest.Register(&guest.Policy{
//			Name:   "nodepin",
//			Filter: filter,
//		})
//	}
//
//	func main() {}
//
// built as a WebAssembly reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o nodepin.wasm .
//
// The SDK implements the host ABI (abi/README.md): it keeps the scheduler's
// node snapshot resident inside the module, decodes what the host sends once
// per change, and calls the registered functions with typed views of the pod
// and nodes. It never uses reflection on the data path, so policies also build
// with TinyGo.
//
// The views (Pod, NodeInfo, WaitingPod) are read through methods; each has
// one accessor, Message, for the wire message underneath. Cluster objects a
// policy declares in Policy.Context are resident too: Cycle.Objects and
// Cycle.Object return them, Object.Get reads their JSON as Values (with
// Quantity and Resources for Kubernetes quantities), and typed views
// (Namespace, PriorityClass, ResourceSlice, ResourceClaim, DeviceClass)
// read the built-in kinds; Cycle.TenantUsage gives the resources requested
// per namespace or per pod label value. Load builds a
// policy from its settings in one call. Package guesttest gives native tests
// the pods, nodes and cycles the host would send.
//
// This package is a module of its own, github.com/wasmsched/wasmsched/guest,
// tagged guest/v0.x.y; COMPATIBILITY.md says what may change between
// versions.
//
// Concurrency: a module instance is only ever called by one host goroutine at
// a time; policy functions need no locking. State kept in package variables
// lives as long as the instance, which the host may replace at any time
// (after a trap, or when it grows or shrinks its pool): use it for caches,
// never for decisions that must survive.
package guest
