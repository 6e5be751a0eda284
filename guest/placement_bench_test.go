package guest

import (
	"fmt"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// BenchmarkPlacementGenerate runs the SDK's side of a PlacementGenerate
// over 5000 resident nodes in NVLink cliques, natively, with a policy that
// reads what examples/topology reads of each node (the clique label, the
// GPUs allocatable and free): where the guest's time in the Gang workload
// goes, without wasm in the way of a profile.
func BenchmarkPlacementGenerate(b *testing.B) {
	defer func() { inst = &instance{} }()
	const n = 5000
	policy := &Policy{
		Name: "cliques",
		PlacementGenerate: func(g *Group, parent Placement) ([]Placement, Status) {
			idx := map[string]int{}
			var out []Placement
			var room []int64
			for _, node := range parent.Nodes {
				v, ok := node.Label("nvidia.com/gpu.clique")
				if !ok {
					continue
				}
				i, seen := idx[v]
				if !seen {
					i = len(out)
					idx[v] = i
					out = append(out, Placement{Name: "clique=" + v})
					room = append(room, 0)
				}
				out[i].Nodes = append(out[i].Nodes, node)
				room[i] += node.Allocatable("nvidia.com/gpu") + node.Free("nvidia.com/gpu")
			}
			return out[:32], OK()
		},
	}
	inst = &instance{policy: policy}
	if code := inst.init(sendMsg(b, &abiv1.InitRequest{HostAbiVersion: ABIVersion, CycleFlags: true})); code != uint32(Success) {
		b.Fatalf("init answered %d", code)
	}
	sync := &abiv1.NodeSync{}
	handles := make([]int32, n)
	for i := range n {
		clique := fmt.Sprintf("large-%d", i/16)
		if i >= n*64/100 {
			clique = fmt.Sprintf("small-%d", (i-n*64/100)/4)
		}
		labels := []*abiv1.KeyValue{
			{Key: "kubernetes.io/arch", Value: "amd64"},
			{Key: "kubernetes.io/hostname", Value: fmt.Sprintf("node-%d", i)},
			{Key: "kubernetes.io/os", Value: "linux"},
			{Key: "node.kubernetes.io/instance-type", Value: "p5.48xlarge"},
			{Key: "nvidia.com/gpu.clique", Value: clique},
			{Key: "nvidia.com/gpu.product", Value: "NVIDIA-H100-80GB-HBM3"},
			{Key: "topology.kubernetes.io/region", Value: "us-east-1"},
			{Key: "topology.kubernetes.io/zone", Value: fmt.Sprintf("us-east-1%c", 'a'+i%3)},
		}
		res := &abiv1.Resources{MilliCpu: 192000, Memory: 2 << 40, EphemeralStorage: 1 << 40, Pods: 110,
			Scalars: []*abiv1.Scalar{{Name: "hugepages-2Mi", Value: 0}, {Name: "nvidia.com/gpu", Value: 8}}}
		sync.Upserts = append(sync.Upserts, &abiv1.NodeInfo{Handle: int32(i), Generation: 1,
			Node:      &abiv1.Node{Name: fmt.Sprintf("node-%d", i), Labels: labels, Allocatable: res, Capacity: res},
			Requested: &abiv1.Resources{MilliCpu: 4000, Memory: 8 << 30, Pods: 3}, PodCount: 3})
		handles[i] = int32(i)
	}
	if code := inst.sync(sendMsg(b, sync)); code != uint32(Success) {
		b.Fatalf("sync answered %d", code)
	}
	pg := &abiv1.PodGroup{Namespace: "ml", Name: "train", Policy: "gang", MinCount: 8}
	var pods []*abiv1.Pod
	for i := range 8 {
		pods = append(pods, &abiv1.Pod{Name: fmt.Sprintf("w%d", i), Namespace: "ml", Uid: fmt.Sprintf("u%d", i), PodGroup: "train"})
	}
	req := marshal(b, &abiv1.PlacementRequest{PodGroup: pg, Pods: pods, Parent: &abiv1.Placement{NodeHandles: handles}})
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		copy(inst.buffer(uint32(len(req))), req)
		if code := inst.call(uint32(abiv1.Point_POINT_PLACEMENT_GENERATE), uint32(len(req))); code != uint32(Success) {
			b.Fatalf("PlacementGenerate answered %d", code)
		}
		if len(inst.marshalResult()) == 0 {
			b.Fatal("no placements")
		}
	}
}
