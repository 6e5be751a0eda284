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
	handles := syncCliques(b, policy, n)
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

// syncCliques makes a fresh instance of policy holding n resident GPU nodes
// in NVLink cliques (the Gang workload's: the first 64 % in cliques of 16
// nodes, the rest of 4) and returns their handles.
func syncCliques(b *testing.B, policy *Policy, n int) []int32 {
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
	return handles
}

// gangPods are a gang's members as the host sends them: what a
// Deployment-made GPU pod carries (labels, annotations, an owner, a
// toleration, required node affinity, a spread constraint, requests).
func gangPods(n int) []*abiv1.Pod {
	pods := make([]*abiv1.Pod, n)
	for i := range pods {
		pods[i] = &abiv1.Pod{
			Name: fmt.Sprintf("train-w%d", i), Namespace: "ml", Uid: fmt.Sprintf("0b5c2a52-6f0e-4c1b-9d3e-%012d", i),
			Labels: []*abiv1.KeyValue{{Key: "app", Value: "train"}, {Key: "job-name", Value: "train"},
				{Key: "scheduling.k8s.io/group-name", Value: "train"}, {Key: "team", Value: "research"}},
			Annotations:       []*abiv1.KeyValue{{Key: "prometheus.io/port", Value: "9090"}, {Key: "prometheus.io/scrape", Value: "true"}},
			Owner:             &abiv1.OwnerReference{Kind: "Job", Name: "train", Uid: "1f2a3b4c"},
			PriorityClassName: "training", SchedulerName: "wasmsched",
			Tolerations: []*abiv1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: "Exists", Effect: "NoExecute"},
				{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"}},
			RequiredNodeAffinity: []*abiv1.NodeSelectorTerm{{MatchExpressions: []*abiv1.Requirement{
				{Key: "kubernetes.io/os", Operator: "In", Values: []string{"linux"}}}}},
			TopologySpreadConstraints: []*abiv1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname",
				WhenUnsatisfiable: "ScheduleAnyway", LabelSelector: &abiv1.LabelSelector{MatchLabels: []*abiv1.KeyValue{{Key: "app", Value: "train"}}}}},
			Requests: &abiv1.Resources{MilliCpu: 8000, Memory: 64 << 30, Scalars: []*abiv1.Scalar{{Name: "nvidia.com/gpu", Value: 1}}},
			PodGroup: "train",
		}
	}
	return pods
}

// BenchmarkPlacementScore runs the SDK's side of the PlacementScore calls
// of one pod-group cycle, natively: a gang of 8 realistic pods, each of 32
// placements of 4 or 16 resident nodes scored in turn (the Gang workload's
// cycle at 5000 nodes), with a policy that reads what examples/topology's
// Score reads. One op is one call.
func BenchmarkPlacementScore(b *testing.B) {
	defer func() { inst = &instance{} }()
	const n = 5000
	policy := &Policy{
		Name: "cliques",
		PlacementScore: func(g *Group, pa *PlacementAssignment) (int64, Status) {
			var capacity int64
			domains := map[string]bool{}
			for _, node := range pa.Placement.Nodes {
				capacity += node.Allocatable("nvidia.com/gpu")
				v, _ := node.Label("nvidia.com/gpu.clique")
				domains[v] = true
			}
			return -capacity - int64(len(domains)-1)*1_000_000, OK()
		},
	}
	handles := syncCliques(b, policy, n)
	pg := &abiv1.PodGroup{Namespace: "ml", Name: "train", Policy: "gang", MinCount: 8}
	pods := gangPods(8)
	var reqs [][]byte
	for p := range 32 {
		nodes := handles[p*16 : p*16+16]
		if p%2 == 1 {
			nodes = handles[n-4*p : n-4*p+4]
		}
		m := &abiv1.PlacementScoreRequest{PodGroup: pg, Pods: pods, Placement: &abiv1.Placement{Name: fmt.Sprintf("p%d", p), NodeHandles: nodes}}
		for i, pod := range pods {
			m.Assignments = append(m.Assignments, &abiv1.Assignment{PodUid: pod.Uid, NodeHandle: nodes[i%len(nodes)]})
		}
		reqs = append(reqs, marshal(b, m))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		req := reqs[i%len(reqs)]
		copy(inst.buffer(uint32(len(req))), req)
		if code := inst.call(uint32(abiv1.Point_POINT_PLACEMENT_SCORE), uint32(len(req))); code != uint32(Success) {
			b.Fatalf("PlacementScore answered %d: %v", code, inst.result.Reasons)
		}
		if inst.result.PlacementScore >= 0 {
			b.Fatalf("score %d, want the negated capacity", inst.result.PlacementScore)
		}
	}
}
