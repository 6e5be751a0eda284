package guest

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// TestNodeIndexHasNoPointers holds the resident snapshot to its design
// (RATIONALE.md, "Why resident nodes are kept encoded"): the arrays a
// resident node keeps are of types without pointers, so a collector, TinyGo's
// above all, allocates them as objects it never scans. A string or a
// pointer added to one of these types would put the scan cost back.
func TestNodeIndexHasNoPointers(t *testing.T) {
	for _, v := range []any{span{}, label{}, scalarAmount{}, byte(0)} {
		if p := pointerIn(reflect.TypeOf(v)); p != "" {
			t.Errorf("%T holds a pointer (%s): resident arrays of it would be scanned by every collection", v, p)
		}
	}
}

// pointerIn names a field or element of typ that is or holds a pointer, or
// returns "".
func pointerIn(typ reflect.Type) string {
	switch typ.Kind() {
	case reflect.Pointer, reflect.UnsafePointer, reflect.String, reflect.Slice, reflect.Map, reflect.Chan, reflect.Func, reflect.Interface:
		return typ.String()
	case reflect.Array:
		return pointerIn(typ.Elem())
	case reflect.Struct:
		for i := range typ.NumField() {
			if p := pointerIn(typ.Field(i).Type); p != "" {
				return typ.Field(i).Name + " " + p
			}
		}
	}
	return ""
}

// residentNodes are n nodes as test/perf's GPU workload has them, with a
// kubelet's usual labels: a fifth with 8 GPUs and the GPU Feature
// Discovery labels.
func residentNodes(n int) *abiv1.NodeSync {
	kv := func(k, v string) *abiv1.KeyValue { return &abiv1.KeyValue{Key: k, Value: v} }
	sync := &abiv1.NodeSync{}
	for i := range n {
		name := fmt.Sprintf("node-%05d", i)
		node := &abiv1.Node{Name: name,
			Labels: []*abiv1.KeyValue{kv("kubernetes.io/arch", "amd64"), kv("kubernetes.io/hostname", name), kv("kubernetes.io/os", "linux"),
				kv("node.kubernetes.io/instance-type", "m5.2xlarge"), kv(LabelRegion, "eu-1"), kv(LabelZone, fmt.Sprintf("zone-%d", i%3))},
			Allocatable: &abiv1.Resources{MilliCpu: 8000, Memory: 32 << 30, Pods: 110},
			Capacity:    &abiv1.Resources{MilliCpu: 8000, Memory: 32 << 30, Pods: 110},
			Conditions:  []*abiv1.NodeCondition{{Type: "Ready", Status: "True"}},
		}
		if i%5 == 0 {
			node.Labels = append(node.Labels, kv("nvidia.com/gpu.memory", "81920"), kv("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"),
				kv("nvidia.com/gpu.sharing-strategy", "none"))
			node.Allocatable.Scalars = []*abiv1.Scalar{{Name: "nvidia.com/gpu", Value: 8}}
		}
		sync.Upserts = append(sync.Upserts, &abiv1.NodeInfo{Handle: int32(i), Generation: int64(i + 1), Node: node,
			Requested: &abiv1.Resources{MilliCpu: 250, Memory: 512 << 20, Pods: 1}, PodCount: 1})
	}
	return sync
}

// BenchmarkResidentNodes syncs 5000 nodes into an instance, as a policy
// that reads nodes through the views' methods holds them, and reports what
// they leave on the heap: objects and bytes per node (natively; the objects
// are what a TinyGo guest's collector marks one by one, and what its
// collection costs grows with). keep-messages=true is the snapshot of a
// policy that wants pods or all nodes, which keeps the decoded messages.
func BenchmarkResidentNodes(b *testing.B) {
	const n = 5000
	data := marshal(b, residentNodes(n))
	for _, keep := range []bool{false, true} {
		b.Run(fmt.Sprintf("keep-messages=%v", keep), func(b *testing.B) {
			var objects, bytes float64
			for range b.N {
				in := &instance{policy: &Policy{Name: "t"}, ready: true, keepMessages: keep}
				copy(in.buffer(uint32(len(data))), data)
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				if code := in.sync(uint32(len(data))); code != uint32(Success) {
					b.Fatalf("sync answered %d: %v", code, in.result.Reasons)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				objects += float64(after.HeapObjects-before.HeapObjects) / n
				bytes += float64(after.HeapAlloc-before.HeapAlloc) / n
				runtime.KeepAlive(in)
			}
			b.ReportMetric(objects/float64(b.N), "objects/node")
			b.ReportMetric(bytes/float64(b.N), "B/node")
		})
	}
}

// BenchmarkSyncNodes is an instance taking 5000 nodes in one NodeSync, as
// a new instance does at its first batch: the time and the allocations
// per node (natively; on wasm an allocation costs some twenty times as
// much, RATIONALE.md).
func BenchmarkSyncNodes(b *testing.B) {
	const n = 5000
	data := marshal(b, residentNodes(n))
	for _, keep := range []bool{false, true} {
		b.Run(fmt.Sprintf("keep-messages=%v", keep), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				in := &instance{policy: &Policy{Name: "t"}, ready: true, keepMessages: keep}
				copy(in.buffer(uint32(len(data))), data)
				if code := in.sync(uint32(len(data))); code != uint32(Success) {
					b.Fatalf("sync answered %d: %v", code, in.result.Reasons)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/node")
		})
	}
}
