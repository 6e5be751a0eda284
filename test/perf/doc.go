// Package perf measures WasmPolicy's scheduling throughput on the upstream
// scheduler_perf harness (k8s.io/kubernetes/test/integration/scheduler_perf)
// against the same rules compiled into the scheduler.
//
// BenchmarkPerfScheduling runs every workload under each profile in one
// process, one profile after the other on identical clusters. The GPU and
// Basic workloads run the gpu rules:
//
//	default      the default scheduler alone
//	native       plus Native, the gpu example (examples/gpu) as a Go plugin
//	wasm-go      plus WasmPolicy running examples/gpu built with Go (wasip1)
//	wasm-tinygo  the same built with TinyGo, when a TinyGo build is available
//
// The Quota workload runs the quota rules under the same profile names:
// native adds QuotaNative (examples/quota as a Go plugin, tenant usage from
// host/clusterctx.Usage), the WASM profiles run examples/quota, all with
// the quotas of the workload in settings.
//
// The Gang workload (Kubernetes 1.37, GenericWorkload and
// TopologyAwareWorkloadScheduling on) places gangs within NVLink cliques:
// default is upstream's built-in placement (TopologyPlacementGenerator,
// PodGroupPodsCount); native adds TopologyNative (examples/topology as a Go
// placement plugin), the WASM profiles run examples/topology; both disable
// TopologyPlacementGenerator. Every run checks that each gang is placed
// whole within one clique and no pod is bound twice.
//
// The package holds only the native twins and benchmark code; nothing here
// is shipped. `make bench` and `make bench-full` run it and print a summary
// with test/perf/report; docs/benchmarks.md explains the workloads and results.
// Plain `go test` runs only the cheap TestNativeTwin, TestNativeQuotaTwin,
// TestNativeTopologyTwin and the configuration's tests, never a benchmark.
package perf
