package host_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/clusterctx"
	"github.com/wasmsched/wasmsched/host/policy"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func TestMain(m *testing.M) { testwasm.Main(m) }

var ctx = context.Background()

// allowEvery makes nodepin settings allowing every n-th of count nodes.
func allowEvery(n, count int) (string, map[string]bool) {
	allowed := map[string]bool{}
	s := `{"nodes": [`
	for i := 0; i < count; i += n {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf("%q", nodeName(i))
		allowed[nodeName(i)] = true
	}
	return s + `]}`, allowed
}

func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

func loadNodepin(b *testing.B, settings string, instances int) *policy.Policy {
	p, err := policy.Load(ctx, policy.Options{Name: "nodepin", Wasm: testwasm.Bytes(b, "examples/nodepin"), Settings: []byte(settings), MaxInstances: instances})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close(ctx) })
	return p
}

// realisticPod has what production pods carry: labels, annotations, three
// containers, tolerations, affinity and a spread constraint.
func realisticPod(i int) *v1.Pod {
	req := v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("512Mi")}
	c := func(name string) v1.Container {
		return v1.Container{Name: name, Image: "registry.example/" + name + ":1.2.3", Resources: v1.ResourceRequirements{Requests: req, Limits: req}}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("web-7d9f8c6b5-%05d", i), Namespace: "shop", UID: "0b5c2a52-6f0e-4c1b-9d3e-1f2a3b4c5d6e",
			Labels:          map[string]string{"app": "web", "tier": "frontend", "pod-template-hash": "7d9f8c6b5", "team": "checkout"},
			Annotations:     map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f8c6b5", UID: "1", Controller: ptr(true)}},
		},
		Spec: v1.PodSpec{
			Containers:  []v1.Container{c("web"), c("sidecar"), c("metrics")},
			Tolerations: []v1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))}},
			Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/os", Operator: v1.NodeSelectorOpIn, Values: []string{"linux"}}}}}}}},
			TopologySpreadConstraints: []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: v1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
		},
	}
}

func ptr[T any](v T) *T { return &v }

func realisticNodes(n int) []fwk.NodeInfo {
	out := make([]fwk.NodeInfo, n)
	for i := range out {
		node := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: nodeName(i), Labels: map[string]string{
				"kubernetes.io/hostname": nodeName(i), "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3), "topology.kubernetes.io/region": "eu-1",
				"node.kubernetes.io/instance-type": "m5.2xlarge",
			}},
			Status: v1.NodeStatus{
				Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("32Gi"), v1.ResourcePods: resource.MustParse("110")},
				Capacity:    v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("32Gi"), v1.ResourcePods: resource.MustParse("110")},
				Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady"}},
			},
		}
		ni := framework.NewNodeInfo()
		ni.SetNode(node)
		out[i] = ni
	}
	return out
}

// BenchmarkEmptyCall is the bare cost of a call into a guest and back,
// through the pool.
func BenchmarkEmptyCall(b *testing.B) {
	p := loadNodepin(b, "", 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := p.Ping(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPodSync is the cost of starting a cycle on an instance: the pod
// encoded on the host, decoded in the guest.
func BenchmarkPodSync(b *testing.B) {
	p := loadNodepin(b, "", 1)
	pods := make([]*v1.Pod, 64)
	for i := range pods {
		pods[i] = realisticPod(i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.PreFilter(ctx, policy.NewCycle(pods[i%len(pods)], nil)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFilterResident is one Filter call for a node the instance
// already holds.
func BenchmarkFilterResident(b *testing.B) {
	p := loadNodepin(b, `{"nodes": ["node-00000"]}`, 1)
	nodes := realisticNodes(1)
	c := policy.NewCycle(realisticPod(0), nodes)
	if _, err := p.Filter(ctx, c, nodes[0]); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if s, err := p.Filter(ctx, c, nodes[0]); err != nil || !s.IsSuccess() {
			b.Fatal(s, err)
		}
	}
}

// BenchmarkNodeSync is sending one changed node to an instance: a usage
// update, as after a binding. The pods added take turns with different
// requests: the host sends nothing for a node whose usage is what the
// instance holds already.
func BenchmarkNodeSync(b *testing.B) {
	p := loadNodepin(b, `{"nodes": ["node-00000"]}`, 1)
	nodes := realisticNodes(1)
	c := policy.NewCycle(realisticPod(0), nodes)
	var pods []*v1.Pod
	var infos []fwk.PodInfo
	for i, cpu := range []string{"100m", "200m"} {
		pod := realisticPod(1 + i)
		pod.Spec.NodeName = nodes[0].Node().Name
		pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
		pi, err := framework.NewPodInfo(pod)
		if err != nil {
			b.Fatal(err)
		}
		pods, infos = append(pods, pod), append(infos, pi)
	}
	if _, err := p.Filter(ctx, c, nodes[0]); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		nodes[0].AddPodInfo(infos[i%2]) // bumps the generation
		if _, err := p.Filter(ctx, c, nodes[0]); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := nodes[0].RemovePod(klogger, pods[i%2]); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	if st := p.Stats(); st.UsageSent < int64(b.N) {
		b.Fatalf("%d usage updates sent for %d changes", st.UsageSent, b.N)
	}
}

// BenchmarkPod5000Nodes filters one pod against 5000 resident nodes, as one
// goroutine and as the scheduler's 16, through wasm and as the same rule
// compiled natively.
func BenchmarkPod5000Nodes(b *testing.B) {
	const n = 5000
	settings, allowed := allowEvery(10, n)
	nodes := realisticNodes(n)
	pods := []*v1.Pod{realisticPod(0), realisticPod(1)}

	native := func(ni fwk.NodeInfo) bool { return allowed[ni.Node().Name] }
	nativeRun := func(parallel int) {
		var wg sync.WaitGroup
		for g := 0; g < parallel; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < n; i += parallel {
					_ = native(nodes[i])
				}
			}()
		}
		wg.Wait()
	}
	for _, parallel := range []int{1, 16} {
		b.Run(fmt.Sprintf("native/goroutines=%d", parallel), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				nativeRun(parallel)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/node")
		})
		b.Run(fmt.Sprintf("wasm/goroutines=%d", parallel), func(b *testing.B) {
			p := loadNodepin(b, settings, 0)
			run := func(pod *v1.Pod) {
				c := policy.NewCycle(pod, nodes)
				var wg sync.WaitGroup
				for g := 0; g < parallel; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := g; i < n; i += parallel {
							s, err := p.Filter(ctx, c, nodes[i])
							if err != nil || s.IsSuccess() != native(nodes[i]) {
								b.Errorf("node %d: %v %v", i, s, err)
								return
							}
						}
					}()
				}
				wg.Wait()
			}
			for k := 0; k < 4; k++ {
				run(pods[k%2]) // sync every instance first
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				run(pods[i%2])
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/node")
			b.ReportMetric(float64(p.Instances()), "instances")
		})
	}
	// The plugin's way: every node in one batch (FilterAll) at the first
	// Filter, then the framework's goroutines look their verdicts up.
	b.Run("wasm-batch/goroutines=16", func(b *testing.B) {
		p := loadNodepin(b, settings, 0)
		run := func(pod *v1.Pod) {
			c := policy.NewCycle(pod, nodes)
			v, err := p.FilterAll(ctx, c, nodes)
			if err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			for g := 0; g < 16; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := g; i < n; i += 16 {
						s, ok := v.Lookup(nodes[i])
						if !ok || s.IsSuccess() != native(nodes[i]) {
							b.Errorf("node %d: %v %v", i, s, ok)
							return
						}
					}
				}()
			}
			wg.Wait()
		}
		for k := 0; k < 4; k++ {
			run(pods[k%2]) // sync every instance first
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			run(pods[i%2])
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/node")
		b.ReportMetric(float64(p.Instances()), "instances")
	})
}

// BenchmarkGuestMemory makes two million Filter calls (a new pod every
// thousand) and reports the guest's linear memory at the start, after one
// million and after two million calls: it must stay flat.
func BenchmarkGuestMemory(b *testing.B) {
	calls := 2_000_000
	p := loadNodepin(b, `{"nodes": ["node-00001"]}`, 1)
	nodes := realisticNodes(2)
	pod := realisticPod(0)
	var c *policy.Cycle
	mib := func() float64 { return float64(p.GuestMemory()[0]) / (1 << 20) }
	before := mib()
	var after1M, after2M float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := 0; k < calls; k++ {
			if k%1000 == 0 {
				c = policy.NewCycle(pod, nodes)
			}
			if _, err := p.Filter(ctx, c, nodes[k%2]); err != nil {
				b.Fatal(err)
			}
			if k == calls/2-1 {
				after1M = mib()
			}
		}
		after2M = mib()
	}
	b.ReportMetric(before, "MiB-start")
	b.ReportMetric(after1M, "MiB-after-1M-calls")
	b.ReportMetric(after2M, "MiB-after-2M-calls")
}

var klogger = klog.Background()

// BenchmarkReload loads and retires a policy version the way a hot reload
// does (compile through the warm cache, start, initialise, swap, close), and
// reports the host heap after the first reload and after 200.
func BenchmarkReload(b *testing.B) {
	wasm := testwasm.Bytes(b, "examples/nodepin")
	heap := func() float64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapInuse) / (1 << 20)
	}
	reload := func() {
		p, err := policy.Load(ctx, policy.Options{Name: "nodepin", Wasm: wasm})
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	reload() // the cold compile, into the cache
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		reload()
	}
	b.StopTimer()
	after1 := heap()
	for i := 0; i < 199; i++ {
		reload()
	}
	b.ReportMetric(after1, "heap-MiB-after-1")
	b.ReportMetric(heap(), "heap-MiB-after-200")
}

// gpuNodes are n nodes as in test/perf's GPU workload: a fifth with 8 GPUs.
func gpuNodes(n int) []fwk.NodeInfo {
	nodes := realisticNodes(n)
	for i, ni := range nodes {
		if i%5 != 0 {
			continue
		}
		node := ni.Node().DeepCopy()
		node.Labels["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-80GB"
		node.Labels["nvidia.com/gpu.memory"] = "81920"
		node.Labels["nvidia.com/gpu.sharing-strategy"] = "none"
		node.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("8")
		fresh := framework.NewNodeInfo()
		fresh.SetNode(node)
		nodes[i] = fresh
	}
	return nodes
}

// BenchmarkGPUCycles runs scheduling cycles of the gpu example on 5000
// nodes the way the scheduler plugin does: a GPU pod's Filter on every node
// in one batch (FilterAll), a CPU pod's Score on 500 nodes (ScoreAll), and
// one node changing per cycle, as a binding does; mix has a GPU pod every
// third cycle, gpu and cpu only one kind; batched is what the scheduler
// asks for each pod it batches (PreFilter, then every call the framework
// makes to rescore its ~500 cached candidates, one of them changed by the
// last binding: ScoreAllMemo, NormalizeScore). It reports the CPU time and the
// wall time per cycle (median and worst), the longest single call and the
// guest memory, for the module built by Go and, when installed, by TinyGo.
func BenchmarkGPUCycles(b *testing.B) {
	const n = 5000
	builds := map[string]func(testing.TB, string) []byte{"go": testwasm.Bytes}
	if testwasm.TinyGoWanted(b) {
		builds["tinygo"] = testwasm.TinyGoBytes
	}
	for _, bench := range []struct {
		name, build string
		gpuEvery    int  // every gpuEvery-th pod requests a GPU
		perNode     bool // GPU pods: Filter node by node on the GPU nodes only, from 16 goroutines
		batched     bool // CPU pods rescoring the same 500 nodes, one changed per cycle
	}{{"go/mix", "go", 3, false, false}, {"go/gpu", "go", 1, false, false}, {"go/gpu-pernode", "go", 1, true, false}, {"go/cpu", "go", 0, false, false}, {"go/batched", "go", 0, false, true},
		{"tinygo/mix", "tinygo", 3, false, false}, {"tinygo/gpu", "tinygo", 1, false, false}, {"tinygo/gpu-pernode", "tinygo", 1, true, false}, {"tinygo/cpu", "tinygo", 0, false, false}, {"tinygo/batched", "tinygo", 0, false, true}} {
		build, ok := builds[bench.build]
		if !ok {
			continue
		}
		b.Run(bench.name, func(b *testing.B) {
			p, err := policy.Load(ctx, policy.Options{Name: "gpu", Wasm: build(b, "examples/gpu")})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = p.Close(ctx) })
			nodes := gpuNodes(n)
			gpuPod, cpuPod := realisticGPUPod(), realisticPod(1)
			filler := realisticPod(2)
			cycle := func(i int) time.Duration {
				start := time.Now()
				// A binding changes one node.
				ni := nodes[(i*7)%n]
				if bench.batched {
					ni = nodes[(i*7)%500]
				}
				filler.Spec.NodeName = ni.Node().Name
				pi, err := framework.NewPodInfo(filler)
				if err != nil {
					b.Fatal(err)
				}
				ni.AddPodInfo(pi)
				if bench.gpuEvery > 0 && i%bench.gpuEvery == 0 {
					c := policy.NewCycle(gpuPod, nodes)
					if _, err := p.PreFilter(ctx, c); err != nil {
						b.Fatal(err)
					}
					if bench.perNode {
						// What the framework asks when another plugin
						// (NodeResourcesFit) already rejected the nodes
						// without GPUs.
						var wg sync.WaitGroup
						for g := 0; g < 16; g++ {
							wg.Add(1)
							go func() {
								defer wg.Done()
								for k := g * 5; k < n; k += 16 * 5 {
									if _, err := p.Filter(ctx, c, nodes[k]); err != nil {
										b.Error(err)
										return
									}
								}
							}()
						}
						wg.Wait()
					} else if _, err := p.FilterAll(ctx, c, nodes); err != nil {
						b.Fatal(err)
					}
				} else if bench.batched {
					cands := nodes[:500]
					c := policy.NewCycle(cpuPod, cands)
					if _, err := p.PreFilter(ctx, c); err != nil {
						b.Fatal(err)
					}
					res, err := p.ScoreAllMemo(ctx, c, cands)
					if err != nil || res.Bad >= 0 || res.Normalized {
						b.Fatal(res, err)
					}
					scores := make([]policy.NodeScore, len(cands))
					for k, ni := range cands {
						scores[k] = policy.NodeScore{Name: ni.Node().Name, Score: res.Values[k]}
					}
					if s, err := p.NormalizeScore(ctx, c, cands, scores); err != nil || s.Code != abiv1.Code_CODE_SUCCESS {
						b.Fatal(s, err)
					}
				} else {
					c := policy.NewCycle(cpuPod, nodes)
					if _, err := p.PreFilter(ctx, c); err != nil {
						b.Fatal(err)
					}
					from := (i * 500) % n
					if res, err := p.ScoreAll(ctx, c, nodes[from:from+500]); err != nil || res.Bad >= 0 {
						b.Fatal(res, err)
					}
				}
				return time.Since(start)
			}
			for i := 0; i < 30; i++ {
				cycle(i) // every instance holds every node
			}
			b.ResetTimer()
			var times []time.Duration
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				times = append(times, cycle(i))
			}
			b.StopTimer()
			// CPU time, unlike wall time, does not count the time other
			// processes of a busy machine took.
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/cycle")
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds()), "us/cycle-p50")
			b.ReportMetric(float64(times[len(times)-1].Microseconds()), "us/cycle-max")
			var mem uint32
			for _, m := range p.GuestMemory() {
				mem += m
			}
			b.ReportMetric(float64(mem)/(1<<20), "MiB-guest")
			b.ReportMetric(float64(p.Instances()), "instances")
			// The longest single call a cycle made (the initial syncs of
			// 5000 nodes, under their own deadline, left out): what a
			// collection in the guest lengthens, and what the call deadline
			// (200 ms by default) bounds.
			var longest time.Duration
			for _, g := range p.Stats().Guest {
				if g.Export != "sync" && g.Export != "init" && g.Export != "_initialize" {
					longest = max(longest, g.Max)
				}
			}
			b.ReportMetric(float64(longest.Microseconds()), "us/call-max")
		})
	}
}

// cpuTime is the CPU time this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkInstanceWarmUp is what a fresh instance of the gpu example
// costs before it can answer, at 5000 and 15000 nodes: loading the policy
// (compiled from the cache after the first iteration), then the first
// FilterAll of a GPU pod, which sends it every node. The scheduler pays
// this once per instance: at a policy's load and each time its pool grows.
// It reports wall and CPU time per warm-up and the instance's linear memory
// afterwards (what a resident snapshot of that many nodes takes), for the
// module built by Go and, when installed, by TinyGo.
func BenchmarkInstanceWarmUp(b *testing.B) {
	gpuPod := realisticGPUPod()
	for _, n := range []int{5000, 15000} {
		nodes := gpuNodes(n)
		for _, tc := range testwasm.Toolchains {
			b.Run(fmt.Sprintf("%s/nodes=%d", tc.Name, n), func(b *testing.B) {
				wasm := tc.Bytes(b, "examples/gpu") // skips TinyGo when not installed
				b.ResetTimer()
				var mem uint32
				cpu0 := cpuTime()
				for i := 0; i < b.N; i++ {
					p, err := policy.Load(ctx, policy.Options{Name: "gpu", Wasm: wasm, MaxInstances: 1})
					if err != nil {
						b.Fatal(err)
					}
					c := policy.NewCycle(gpuPod, nodes)
					if _, err := p.PreFilter(ctx, c); err != nil {
						b.Fatal(err)
					}
					if _, err := p.FilterAll(ctx, c, nodes); err != nil {
						b.Fatal(err)
					}
					mem = p.GuestMemory()[0]
					_ = p.Close(ctx)
				}
				b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
				b.ReportMetric(float64(mem)/(1<<20), "MiB-guest")
			})
		}
	}
}

// realisticGPUPod is realisticPod(0) requesting one GPU.
func realisticGPUPod() *v1.Pod {
	pod := realisticPod(0)
	pod.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
	return pod
}

// BenchmarkPlacementGenerate is the topology example's PlacementGenerate
// over 5000 GPU nodes in 650 NVLink cliques (the Gang workload's 5000-node
// cluster) for a gang of 8 one-GPU pods: first on a fresh instance (the
// nodes synced first, then the call), then on the instance holding them.
// It reports the guest time of the first and of a later call in the
// export that runs PlacementGenerate (the call has WasmPolicy's 200 ms
// deadline; the sync before it has the longer start-up one), per toolchain,
// and the guest time of a PlacementScore call, each placement scored once.
func BenchmarkPlacementGenerate(b *testing.B) {
	nodes := gangNodes(5000)
	pods := make([]*v1.Pod, 8)
	for i := range pods {
		pods[i] = realisticGPUPod()
		pods[i].Name, pods[i].UID = fmt.Sprintf("w%d", i), types.UID(fmt.Sprintf("uid-w%d", i))
	}
	g := &policy.Group{PodGroup: &abiv1.PodGroup{Namespace: "default", Name: "train", Policy: "gang", MinCount: 8}, Pods: pods}
	parent := policy.Placement{Nodes: nodes}
	callMs := func(p *policy.Policy) float64 {
		for _, t := range p.Stats().Guest {
			if t.Export == "call" {
				return float64(t.Time.Microseconds()) / 1000
			}
		}
		return 0
	}
	for _, tc := range testwasm.Toolchains {
		b.Run(tc.Name, func(b *testing.B) {
			wasm := tc.Bytes(b, "examples/topology")
			b.ResetTimer()
			var first, later, laterCPU, score float64
			for i := 0; i < b.N; i++ {
				p, err := policy.Load(ctx, policy.Options{Name: "topology", Wasm: wasm, MaxInstances: 1})
				if err != nil {
					b.Fatal(err)
				}
				var pls []policy.Placement
				for j := range 3 {
					before, cpu0 := callMs(p), cpuTime()
					var st policy.Status
					pls, st, err = p.GeneratePlacements(ctx, g, parent)
					if err != nil || !st.IsSuccess() || len(pls) != 32 {
						b.Fatalf("GeneratePlacements: %d placements, %+v, %v; want 32", len(pls), st, err)
					}
					switch j {
					case 0:
						first += callMs(p) - before
					case 2:
						later += callMs(p) - before
						laterCPU += float64((cpuTime() - cpu0).Microseconds()) / 1000
					}
				}
				// The scheduler's next step: every placement scored, the
				// group's pods assigned to its first nodes.
				before := callMs(p)
				for _, pl := range pls {
					as := make([]policy.Assignment, len(pods))
					for k, pod := range pods {
						as[k] = policy.Assignment{PodUID: string(pod.UID), Node: pl.Nodes[k%len(pl.Nodes)]}
					}
					if _, st, err := p.ScorePlacement(ctx, g, pl, as); err != nil || !st.IsSuccess() {
						b.Fatalf("ScorePlacement %s: %+v, %v", pl.Name, st, err)
					}
				}
				score += (callMs(p) - before) / float64(len(pls))
				_ = p.Close(ctx)
			}
			b.ReportMetric(first/float64(b.N), "first-call-ms")
			b.ReportMetric(later/float64(b.N), "later-call-ms")
			// The process's CPU in the later call, host side included: on
			// a busy machine the wall time above grows with the wait for
			// a core, this does not.
			b.ReportMetric(laterCPU/float64(b.N), "later-cpu-ms")
			b.ReportMetric(score/float64(b.N), "score-call-ms")
		})
	}
}

// gangNodes are n nodes of 8 GPUs in NVLink cliques as in the Gang
// workload: the first 64 % in cliques of 16 nodes, the rest of 4.
func gangNodes(n int) []fwk.NodeInfo {
	nodes := realisticNodes(n)
	large := n * 64 / 100
	for i, ni := range nodes {
		node := ni.Node().DeepCopy()
		clique := fmt.Sprintf("large-%d", i/16)
		if i >= large {
			clique = fmt.Sprintf("small-%d", (i-large)/4)
		}
		node.Labels["nvidia.com/gpu.clique"] = clique
		node.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("8")
		fresh := framework.NewNodeInfo()
		fresh.SetNode(node)
		nodes[i] = fresh
	}
	return nodes
}

// BenchmarkQuotaCycles runs PreFilter cycles of the quota example with the
// Quota benchmark's shape (test/perf: 20 tenants with quotas in settings,
// tenant usage synced to the guest), each after a binding changed one
// tenant's usage, as in a scheduler placing pods one after the other. It
// reports the CPU time per cycle, for the module built by Go and, when
// installed, by TinyGo.
func BenchmarkQuotaCycles(b *testing.B) {
	builds := map[string]func(testing.TB, string) []byte{"go": testwasm.Bytes}
	if testwasm.TinyGoWanted(b) {
		builds["tinygo"] = testwasm.TinyGoBytes
	}
	var quotas []string
	for i := range 20 {
		quotas = append(quotas, fmt.Sprintf(`"tenant-%d": {"min": {"cpu": "1000", "memory": "5Ti"}, "max": {"cpu": "2000", "memory": "10Ti"}, "weight": %d}`, i, i%4+1))
	}
	settings := `{"elasticQuotas": false, "quotas": {` + strings.Join(quotas, ", ") + `}}`
	for _, name := range []string{"go", "tinygo"} {
		build, ok := builds[name]
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			p, err := policy.Load(ctx, policy.Options{Name: "quota", Wasm: build(b, "examples/quota"), Settings: []byte(settings), MaxInstances: 1})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = p.Close(ctx) })
			usage := clusterctx.NewUsage()
			if err := p.Bind(&clusterctx.Binding{Usage: usage, Namespaces: true}); err != nil {
				b.Fatal(err)
			}
			bound := 0
			bind := func(tenant int) {
				pod := realisticPod(bound)
				pod.Namespace, pod.UID, pod.Spec.NodeName = fmt.Sprintf("tenant-%d", tenant), types.UID(fmt.Sprint("bound-", bound)), "node-0"
				usage.Set(pod)
				bound++
			}
			for i := range 1000 {
				bind(i % 20)
			}
			nodes := gpuNodes(10)
			cycle := func(i int) {
				bind(i % 20)
				pod := realisticPod(1)
				pod.Namespace = fmt.Sprintf("tenant-%d", (i+7)%20)
				if _, err := p.PreFilter(ctx, policy.NewCycle(pod, nodes)); err != nil {
					b.Fatal(err)
				}
			}
			for i := range 100 {
				cycle(i)
			}
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				cycle(i)
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/cycle")
		})
	}
}
