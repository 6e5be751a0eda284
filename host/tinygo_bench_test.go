package host_test

import (
	"os"
	"testing"

	"github.com/tetratelabs/wazero"
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/policy"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// BenchmarkToolchains measures, in one run, what the choice between the
// standard Go toolchain and TinyGo changes for a policy: module sizes of
// every example, compile and instantiate times, and the per-call costs of
// BenchmarkEmptyCall, BenchmarkFilterResident, BenchmarkPodSync and
// BenchmarkNodeSync, on the nodepin example built by each. guest/README.md
// ("Two toolchains") quotes its figures. The TinyGo half is skipped when
// the toolchain is not installed (`make tinygo`).
func BenchmarkToolchains(b *testing.B) {
	examples, err := os.ReadDir("../examples")
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range testwasm.Toolchains {
		b.Run(tc.Name, func(b *testing.B) {
			b.Run("size", func(b *testing.B) {
				for range b.N {
					for _, e := range examples {
						if e.IsDir() {
							b.ReportMetric(float64(len(tc.Bytes(b, "examples/"+e.Name())))/1024, "KiB-"+e.Name())
						}
					}
				}
			})
			wasm := tc.Bytes(b, "examples/nodepin")
			cfg := engine.Config{Name: "nodepin"}
			b.Run("compile-cold", func(b *testing.B) {
				for range b.N {
					cfg := cfg
					cfg.Cache = wazero.NewCompilationCache() // empty: a real compile
					m, err := engine.Compile(ctx, wasm, cfg)
					if err != nil {
						b.Fatal(err)
					}
					_ = m.Close(ctx)
				}
			})
			b.Run("compile-cached", func(b *testing.B) {
				cfg, dir := cfg, b.TempDir()
				cfg.Cache, err = wazero.NewCompilationCacheWithDir(dir)
				if err != nil {
					b.Fatal(err)
				}
				m, err := engine.Compile(ctx, wasm, cfg) // fills the cache
				if err != nil {
					b.Fatal(err)
				}
				_ = m.Close(ctx)
				// A fresh runtime per iteration, as a restart or a rollback
				// has; the cache is on disk.
				b.ResetTimer()
				for range b.N {
					b.StopTimer()
					cfg.Cache, _ = wazero.NewCompilationCacheWithDir(dir)
					b.StartTimer()
					m, err := engine.Compile(ctx, wasm, cfg)
					if err != nil {
						b.Fatal(err)
					}
					_ = m.Close(ctx)
				}
			})
			b.Run("instantiate", func(b *testing.B) {
				m, err := engine.Compile(ctx, wasm, cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close(ctx)
				var mem uint32
				b.ResetTimer()
				for range b.N {
					in, err := m.NewInstance(ctx)
					if err != nil {
						b.Fatal(err)
					}
					mem = in.MemoryBytes()
					in.Close(ctx)
				}
				b.ReportMetric(float64(mem)/1024, "KiB-memory")
			})

			load := func(b *testing.B, settings string) *policy.Policy {
				p, err := policy.Load(ctx, policy.Options{Name: "nodepin", Wasm: wasm, Settings: []byte(settings), MaxInstances: 1})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = p.Close(ctx) })
				return p
			}
			b.Run("empty-call", func(b *testing.B) {
				p := load(b, "")
				b.ResetTimer()
				for range b.N {
					if err := p.Ping(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("filter-resident", func(b *testing.B) {
				p := load(b, `{"nodes": ["node-00000"]}`)
				nodes := realisticNodes(1)
				c := policy.NewCycle(realisticPod(0), nodes)
				if _, err := p.Filter(ctx, c, nodes[0]); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for range b.N {
					if s, err := p.Filter(ctx, c, nodes[0]); err != nil || !s.IsSuccess() {
						b.Fatal(s, err)
					}
				}
			})
			b.Run("pod-sync", func(b *testing.B) {
				p := load(b, "")
				pods := make([]*v1.Pod, 64)
				for i := range pods {
					pods[i] = realisticPod(i)
				}
				b.ResetTimer()
				for i := range b.N {
					// A new cycle: the pod is encoded and sent again.
					if _, err := p.PreFilter(ctx, policy.NewCycle(pods[i%len(pods)], nil)); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("node-sync", func(b *testing.B) {
				p := load(b, `{"nodes": ["node-00000"]}`)
				nodes := realisticNodes(1)
				c := policy.NewCycle(realisticPod(0), nodes)
				pod := realisticPod(1)
				pod.Spec.NodeName = nodes[0].Node().Name
				pi, err := framework.NewPodInfo(pod)
				if err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for range b.N {
					nodes[0].AddPodInfo(pi) // bumps the generation: a sync
					if _, err := p.Filter(ctx, c, nodes[0]); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if err := nodes[0].RemovePod(klogger, pod); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			})
			b.Run("guest-memory", func(b *testing.B) {
				// As BenchmarkGuestMemory: a million Filter calls, a new pod
				// every thousand; the guest's memory must stay flat.
				p := load(b, `{"nodes": ["node-00001"]}`)
				nodes := realisticNodes(2)
				pod := realisticPod(0)
				mib := func() float64 { return float64(p.GuestMemory()[0]) / (1 << 20) }
				before := mib()
				var c *policy.Cycle
				b.ResetTimer()
				for range b.N {
					for k := range 1_000_000 {
						if k%1000 == 0 {
							c = policy.NewCycle(pod, nodes)
						}
						if _, err := p.Filter(ctx, c, nodes[k%2]); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(before, "MiB-start")
				b.ReportMetric(mib(), "MiB-after-1M-calls")
			})
		})
	}
}
