package perf

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	_ "k8s.io/component-base/logs/json/register"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"

	"github.com/wasmsched/wasmsched/host/plugin"
	"github.com/wasmsched/wasmsched/host/policy"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

var rounds = flag.Int("rounds", 1, "how many times to run every profile (alternating the order)")

// measuredProfile, when set, is where a workload with a measure namespace
// (GPU, Churn, Gang) writes the CPU profile of its measured part: from its
// first pod there to its end. -test.cpuprofile profiles the whole
// process, set-up included (the Churn workload's pending pods, the nodes'
// creation). Run one workload per process: each overwrites the file.
var measuredProfile = flag.String("measured-cpuprofile", "", "write the CPU profile of the measured part of the workload to this file")

// measuredTrace, when set, is where the measured part's execution trace
// goes (runtime/trace: what each goroutine waited on, and for how long), as
// measuredProfile's CPU profile.
var measuredTrace = flag.String("measured-trace", "", "write the execution trace of the measured part of the workload to this file")

func TestMain(m *testing.M) { testwasm.Main(m, initTests) }

// initTests is scheduler_perf's set-up (its flags, logging), which must run
// before the tests.
func initTests() {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// profile is one scheduler configuration under test. Its name is the same
// in every workload, so that the report compares like with like; what the
// profile adds to the default scheduler depends on the rules the workload
// exercises (its family: gpu or quota).
type profile struct {
	Name string
	// Families holds the scheduler configuration of the profile per
	// family of workloads; a family the profile lacks is not run under it.
	Families map[string]schedulerSetup
}

// schedulerSetup is what one profile adds to the default scheduler for one
// family of workloads.
type schedulerSetup struct {
	// Plugin is the plugin added to the default profile; empty for none.
	Plugin string
	// Args are the plugin's arguments (JSON) for a native plugin.
	Args string
	// Policy, Wasm and Settings describe the policy WasmPolicy runs: its
	// name, module file and settings (JSON, empty for none).
	Policy, Wasm, Settings string
	// Batchable turns off PodTopologySpread's system default constraints
	// (defaultingType List, none), as upstream's batching benchmarks do:
	// with them PodTopologySpread refuses to sign every pod, and
	// opportunistic batching never applies. Every workload sets it (issue
	// 23: batching on in every profile); results before it ran without
	// batching.
	Batchable bool
	// NoTopologyGenerator disables the scheduler's TopologyPlacementGenerator:
	// the scheduler asks only the first placement generator of a profile,
	// and the profile's plugin generates the placements.
	NoTopologyGenerator bool
}

// The families of workloads: GPU and Basic run the gpu rules, Quota the
// quota rules.
const (
	familyGPU   = "gpu"
	familyQuota = "quota"
	// familyChurn is the gpu family with batching possible (Batchable).
	familyChurn = "churn"
	// familyGang runs the topology rules on gangs (gang_perf_test.go),
	// Kubernetes 1.37 only (gangAvailable).
	familyGang = "gang"
)

// profiles returns the profiles to run; wasm-tinygo only when TinyGo can
// build the guest, the WASM profiles of the Quota workload only when
// examples/quota exists. Modules are built only for the profiles and
// families the label filter can select.
func profiles(b *testing.B) []profile {
	gpu, quota := selected(familyGPU), selected(familyQuota) && quotaAvailable(b)
	gang := gangAvailable && selected(familyGang)
	ps := []profile{
		{Name: "default", Families: map[string]schedulerSetup{familyGPU: {}, familyQuota: {}}},
		{Name: "native", Families: map[string]schedulerSetup{familyGPU: {Plugin: NativeName}, familyQuota: {Plugin: QuotaNativeName, Args: quotaSettings}}},
	}
	if gang {
		// default is upstream's built-in placement: the workload turns the
		// gates on, TopologyPlacementGenerator and PodGroupPodsCount run.
		ps[0].Families[familyGang] = schedulerSetup{}
		ps[1].Families[familyGang] = schedulerSetup{Plugin: gangNativeName, Args: gangSettings, NoTopologyGenerator: true}
	}
	wasm := func(name string, path func(testing.TB, string) string) {
		if !selected(name) {
			return
		}
		p := profile{Name: name, Families: map[string]schedulerSetup{}}
		if gpu {
			p.Families[familyGPU] = schedulerSetup{Plugin: plugin.Name, Policy: "gpu", Wasm: path(b, "examples/gpu")}
		}
		if quota {
			p.Families[familyQuota] = schedulerSetup{Plugin: plugin.Name, Policy: "quota", Wasm: path(b, "examples/quota"), Settings: quotaSettings}
		}
		if gang {
			p.Families[familyGang] = schedulerSetup{Plugin: plugin.Name, Policy: "topology", Wasm: path(b, "examples/topology"), Settings: gangSettings, NoTopologyGenerator: true}
		}
		ps = append(ps, p)
	}
	wasm("wasm-go", testwasm.Path)
	if testwasm.TinyGoWanted(b) {
		wasm("wasm-tinygo", testwasm.TinyGoPath)
	} else {
		b.Logf("profile wasm-tinygo left out: no TinyGo toolchain (make tinygo), or %s=%s", testwasm.EnvTinyGo, testwasm.TinyGoOff)
	}
	return ps
}

// selected reports whether the label filter (-perf-scheduling-label-filter)
// can select test cases labelled name, a profile or a family: not when it
// excludes the label, nor when it requires another label of the same kind
// (gpu, basic and churn are all the gpu family).
func selected(name string) bool {
	kinds := [][]string{{"default", "native", "wasm-go", "wasm-tinygo"}, {familyGPU, "basic", familyChurn, familyQuota, familyGang}}
	for _, l := range strings.Split(perf.PerfSchedulingLabelFilter, ",") {
		if l == "-"+name {
			return false
		}
		l = strings.TrimPrefix(l, "+")
		for _, k := range kinds {
			if slices.Contains(k, name) && slices.Contains(k, l) && l != name && !(name == familyGPU && (l == "basic" || l == familyChurn)) {
				return false
			}
		}
	}
	return true
}

// quotaAvailable reports whether the quota example exists in this tree.
func quotaAvailable(b *testing.B) bool {
	if _, err := os.Stat(filepath.Join(testwasm.Root(b), "examples", "quota", "main.go")); err != nil {
		b.Logf("no examples/quota: workload Quota runs without its WASM profiles")
		return false
	}
	return true
}

// config writes the scheduler_perf configuration for ps, with the scheduler
// configuration of each profile and family, into dir and returns its path.
func config(b testing.TB, dir string, ps []profile) string {
	testdata, err := filepath.Abs("testdata")
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range ps {
		for family, s := range p.Families {
			s.Batchable = true
			var buf bytes.Buffer
			if err := schedulerConfig.Execute(&buf, s); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, family+"-"+p.Name+".yaml"), buf.Bytes(), 0o644); err != nil {
				b.Fatal(err)
			}
			if family != familyGPU {
				continue
			}
			// The Churn workload: the gpu rules.
			buf.Reset()
			if err := schedulerConfig.Execute(&buf, s); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, familyChurn+"-"+p.Name+".yaml"), buf.Bytes(), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Each round runs every profile once, every other round in reverse
	// order, so that a machine getting slower or faster during the run
	// weighs on every profile alike. Round r > 1 names its cases
	// <Workload>_<profile>_<r>.
	cases := map[string][]map[string]string{}
	for r := 1; r <= max(*rounds, 1); r++ {
		for k := range ps {
			p := ps[k]
			if r%2 == 0 {
				p = ps[len(ps)-1-k]
			}
			name := p.Name
			if r > 1 {
				name += fmt.Sprintf("_%d", r)
			}
			for _, family := range []string{familyGPU, familyQuota, familyGang} {
				if _, ok := p.Families[family]; ok {
					cases[family] = append(cases[family], map[string]string{"Case": name, "Profile": p.Name,
						"SchedulerConfig": filepath.Join(dir, family+"-"+p.Name+".yaml")})
				}
			}
			if _, ok := p.Families[familyGPU]; ok {
				cases[familyChurn] = append(cases[familyChurn], map[string]string{"Case": name, "Profile": p.Name,
					"SchedulerConfig": filepath.Join(dir, familyChurn+"-"+p.Name+".yaml")})
			}
		}
	}
	var buf bytes.Buffer
	if err := workloads.Execute(&buf, map[string]any{
		"Testdata": testdata, "Cases": cases[familyGPU], "QuotaCases": cases[familyQuota], "ChurnCases": cases[familyChurn], "GangCases": cases[familyGang],
		"Rounds": make([]struct{}, 10), "Tenants": quotaTenants, "OverTenant": quotaOverTenant,
		"ChurnRounds": churnRounds(10), "ChurnNamespaces": churnNamespaces, "GangRounds": gangRounds(10), "GangInit": gangInit,
	}); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "performance-config.yaml")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

var schedulerConfig = template.Must(template.New("scheduler").Parse(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
{{- if .Plugin}}
  plugins:
    multiPoint:
      enabled:
      - name: {{.Plugin}}
{{- if .NoTopologyGenerator}}
      disabled:
      - name: TopologyPlacementGenerator
{{- end}}
{{- end}}
{{- if or .Args .Wasm .Batchable}}
  pluginConfig:
{{- end}}
{{- if .Batchable}}
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints: []
{{- end}}
{{- if .Args}}
  - name: {{.Plugin}}
    args: {{.Args}}
{{- end}}
{{- if .Wasm}}
  - name: WasmPolicy
    args:
      namespace: default
      policies:
      - name: {{.Policy}}
        source:
          file: {{.Wasm}}
{{- if .Settings}}
        settings: {{.Settings}}
{{- end}}
{{- end}}
`))

// workloads are the scheduler_perf test cases: each workload once per
// profile, profiles next to each other so that runs of one workload are as
// close in time as they can be.
//
//   - Basic: SchedulingBasic's shape, CPU pods only.
//   - GPU: a fifth of the nodes have 8 GPUs (three quarters A100 80GB, a
//     quarter time-sliced T4); a third of the measured pods request one GPU,
//     half of them training pods that want an A100 or H100 with at least
//     40 GiB, half notebooks that accept shared GPUs. Pods arrive mixed, in
//     ten rounds. At 5000 nodes it measures 5000 pods, not 10000: nearly
//     every GPU pod is filtered against every node, which makes it the
//     slowest workload by far. At 15 000 nodes (label huge, make
//     bench-huge only) it measures the same 5000 pods.
//   - Quota: tenants as namespaces under the quota rules, quotas in the
//     profile's settings (quota_perf_test.go). Every tenant first places
//     its share of the initial pods (20000 at 5000 nodes), then the
//     measured pods arrive across the tenants in ten rounds, half of the
//     tenants borrowing beyond their guaranteed share; the tenant
//     OverTenant starts at its max, so its measured pods exceed it and stay
//     pending under the quota profiles. They do not preempt
//     (preemptionPolicy Never): the workload measures placing pods under
//     quota, not preemption. The barrier and the throughput leave that
//     tenant out. The measured pods carry measuredLabel, so that the
//     counters and CPU of the measured part start at the first of them.
//   - Churn: opportunistic batching and queueing hints under churn. Every
//     node has GPUs (three quarters 8 A100 80GB, a quarter 8 time-sliced
//     T4), so that only the gpu rules reject the pending pods: pods that
//     want an H100 (churnPending), which no node has, rejected on every
//     node (a node without GPUs would have NodeResourcesFit reject them,
//     and its hints requeue them on every pod deletion). Once each was
//     attempted, the measured CPU pods arrive in ten rounds while
//     churning CPU pods are created and deleted (churnRounds): the
//     scheduler must place the measured pods while deciding, on each
//     event, whether to retry the pending ones. Under the default profile
//     the H100 pods are placed on the A100s: it knows no product rule.
//     The report reads the batching and requeue counters (counters_test.go).
//   - Gang: gangs of GPU pods placed within one NVLink domain
//     (nvidia.com/gpu.clique), Kubernetes 1.37 with GenericWorkload and
//     TopologyAwareWorkloadScheduling on (gang_perf_test.go). Nodes of 8
//     GPUs in large cliques (16 nodes) and small ones (4 nodes); PodGroups
//     of 8 one-GPU pods (gang, minCount 8, topology constraint on the
//     clique label) arrive in ten rounds after the initial gangs. Under
//     default, upstream's built-in placement (TopologyPlacementGenerator,
//     PodGroupPodsCount) places them; native and the WASM profiles run the
//     topology rules (examples/topology) with the built-in generator
//     disabled. Every profile must place every gang whole within one
//     clique, none split, no pod bound twice; the topology rules must
//     also keep to the small cliques while one has room (checkGang).
//
// Every createPods sets signatureBatchSize beyond its count: scheduler_perf
// otherwise labels each pod "signature: signature-label-<index>", and
// InterPodAffinity signs pod labels, so no two pods would share a
// signature and batching could never apply.
var workloads = template.Must(template.New("workloads").Parse(`
{{- $td := .Testdata}}
{{- range .Cases}}
- name: GPU_{{.Case}}
  labels: [{{.Profile}}, gpu]
  schedulerConfigPath: {{.SchedulerConfig}}
  defaultPodTemplatePath: {{$td}}/pod-cpu.yaml
  workloadTemplate:
  - opcode: createNodes
    countParam: $cpuNodes
    nodeTemplatePath: {{$td}}/node-cpu.yaml
  - opcode: createNodes
    countParam: $a100Nodes
    nodeTemplatePath: {{$td}}/node-a100.yaml
  - opcode: createNodes
    countParam: $t4Nodes
    nodeTemplatePath: {{$td}}/node-t4-shared.yaml
  - opcode: createPods
    signatureBatchSize: 1000000
    countParam: $initPods
  - opcode: startCollectingMetrics
    namespaces: [measure]
{{- range $.Rounds}}
  - opcode: createPods
    signatureBatchSize: 1000000
    countParam: $train
    namespace: measure
    podTemplatePath: {{$td}}/pod-train.yaml
    skipWaitToCompletion: true
  - opcode: createPods
    signatureBatchSize: 1000000
    countParam: $notebook
    namespace: measure
    podTemplatePath: {{$td}}/pod-notebook.yaml
    skipWaitToCompletion: true
  - opcode: createPods
    signatureBatchSize: 1000000
    countParam: $cpu
    namespace: measure
    skipWaitToCompletion: true
{{- end}}
  - opcode: barrier
    namespaces: [measure]
  - opcode: stopCollectingMetrics
  workloads:
  - name: 500Nodes
    labels: [performance, quick]
    params: {cpuNodes: 400, a100Nodes: 75, t4Nodes: 25, initPods: 500, train: 25, notebook: 25, cpu: 100}
  - name: 5000Nodes_5000Pods
    labels: [performance, full]
    params: {cpuNodes: 4000, a100Nodes: 750, t4Nodes: 250, initPods: 1000, train: 83, notebook: 83, cpu: 334}
  - name: 15000Nodes_5000Pods
    labels: [performance, huge]
    params: {cpuNodes: 12000, a100Nodes: 2250, t4Nodes: 750, initPods: 3000, train: 83, notebook: 83, cpu: 334}
{{- end}}
{{- range .Cases}}
- name: Basic_{{.Case}}
  labels: [{{.Profile}}, basic]
  schedulerConfigPath: {{.SchedulerConfig}}
  defaultPodTemplatePath: {{$td}}/pod-cpu.yaml
  workloadTemplate:
  - opcode: createNodes
    countParam: $initNodes
    nodeTemplatePath: {{$td}}/node-cpu.yaml
  - opcode: createPods
    signatureBatchSize: 1000000
    countParam: $initPods
  - opcode: createPods
    signatureBatchSize: 1000000
    countParam: $measurePods
    namespace: measure
    collectMetrics: true
  workloads:
  - name: 500Nodes
    labels: [performance, basic-quick]
    params: {initNodes: 500, initPods: 500, measurePods: 2000}
  - name: 5000Nodes_10000Pods
    labels: [performance, full]
    params: {initNodes: 5000, initPods: 1000, measurePods: 10000}
{{- end}}
{{- range .ChurnCases}}
- name: Churn_{{.Case}}
  labels: [{{.Profile}}, churn]
  schedulerConfigPath: {{.SchedulerConfig}}
  defaultPodTemplatePath: {{$td}}/pod-cpu.yaml
  workloadTemplate:
  - opcode: createNodes
    countParam: $a100Nodes
    nodeTemplatePath: {{$td}}/node-a100.yaml
  - opcode: createNodes
    countParam: $t4Nodes
    nodeTemplatePath: {{$td}}/node-t4-shared.yaml
  - opcode: createPods
    signatureBatchSize: 1000000
    countParam: $pending
    namespace: pending
    podTemplatePath: {{$td}}/pod-h100.yaml
    skipWaitToCompletion: true
  - opcode: barrier
    namespaces: [pending]
    stageRequirement: Attempted
  - opcode: startCollectingMetrics
    namespaces: [measure]
{{- range $.ChurnRounds}}
  - opcode: createPods
    signatureBatchSize: 1000000
    countParam: $churn
    namespace: {{.Create}}
    skipWaitToCompletion: true
  - opcode: createPods
    signatureBatchSize: 1000000
    countParam: $measure
    namespace: measure
    skipWaitToCompletion: true
{{- if .Delete}}
  - opcode: deletePods
    namespace: {{.Delete}}
{{- end}}
{{- end}}
{{- range $.ChurnNamespaces}}
  - opcode: deletePods
    namespace: {{.}}
{{- end}}
  - opcode: barrier
    namespaces: [measure]
  - opcode: stopCollectingMetrics
  workloads:
  - name: 500Nodes
    labels: [performance, quick]
    params: {a100Nodes: 375, t4Nodes: 125, pending: 500, churn: 100, measure: 200}
  - name: 5000Nodes
    labels: [performance, full]
    params: {a100Nodes: 3750, t4Nodes: 1250, pending: 2000, churn: 200, measure: 500}
{{- end}}
{{- range .GangCases}}
- name: Gang_{{.Case}}
  labels: [{{.Profile}}, gang]
  featureGates:
    GenericWorkload: true
    TopologyAwareWorkloadScheduling: true
  schedulerConfigPath: {{.SchedulerConfig}}
  workloadTemplate:
  - opcode: createNodes
    countParam: $largeNodes
    nodeTemplatePath: {{$td}}/node-gang.yaml
    templateParams: {kind: large, cliqueSize: 16}
  - opcode: createNodes
    countParam: $smallNodes
    nodeTemplatePath: {{$td}}/node-gang.yaml
    templateParams: {kind: small, cliqueSize: 4}
  - opcode: createPodGroups
    countParam: $initGangs
    namespace: {{$.GangInit}}
    templatePath: {{$td}}/podgroup-gang.yaml
    templateParams: {round: init, gangSize: $gangSize}
  - opcode: createPods
    signatureBatchSize: 1000000
    countParam: $initGangs
    countMultiplierParam: $gangSize
    namespace: {{$.GangInit}}
    podTemplatePath: {{$td}}/pod-gang.yaml
    templateParams: {round: init, gangSize: $gangSize}
  - opcode: startCollectingMetrics
    namespaces: [measure]
{{- range $.GangRounds}}
  - opcode: createPodGroups
    countParam: $gangs
    namespace: measure
    templatePath: {{$td}}/podgroup-gang.yaml
    templateParams: {round: {{.}}, gangSize: $gangSize}
  - opcode: createPods
    signatureBatchSize: 1000000
    countParam: $gangs
    countMultiplierParam: $gangSize
    namespace: measure
    podTemplatePath: {{$td}}/pod-gang.yaml
    templateParams: {round: {{.}}, gangSize: $gangSize}
    skipWaitToCompletion: true
{{- end}}
  - opcode: barrier
    namespaces: [measure]
  - opcode: stopCollectingMetrics
  workloads:
  - name: 500Nodes
    labels: [performance, quick]
    params: {largeNodes: 320, smallNodes: 180, gangSize: 8, initGangs: 40, gangs: 20}
  - name: 5000Nodes
    labels: [performance, full]
    params: {largeNodes: 3200, smallNodes: 1800, gangSize: 8, initGangs: 50, gangs: 20}
{{- end}}
{{- range .QuotaCases}}
- name: Quota_{{.Case}}
  labels: [{{.Profile}}, quota]
  schedulerConfigPath: {{.SchedulerConfig}}
  defaultPodTemplatePath: {{$td}}/pod-cpu.yaml
  workloadTemplate:
  - opcode: createNodes
    countParam: $nodes
    nodeTemplatePath: {{$td}}/node-cpu.yaml
{{- range $.Tenants}}
  - opcode: createPods
    signatureBatchSize: 1000000
    countParam: $initPods
    namespace: {{.}}
{{- end}}
  - opcode: createPods
    signatureBatchSize: 1000000
    countParam: $overInitPods
    namespace: {{$.OverTenant}}
  - opcode: startCollectingMetrics
    namespaces: [{{range $i, $t := $.Tenants}}{{if $i}}, {{end}}{{$t}}{{end}}]
{{- range $.Rounds}}
{{- range $.Tenants}}
  - opcode: createPods
    signatureBatchSize: 1000000
    countParam: $measure
    namespace: {{.}}
    podTemplatePath: {{$td}}/pod-cpu-measured.yaml
    skipWaitToCompletion: true
{{- end}}
  - opcode: createPods
    signatureBatchSize: 1000000
    countParam: $over
    namespace: {{$.OverTenant}}
    podTemplatePath: {{$td}}/pod-over.yaml
    skipWaitToCompletion: true
{{- end}}
  - opcode: barrier
    namespaces: [{{range $i, $t := $.Tenants}}{{if $i}}, {{end}}{{$t}}{{end}}]
  - opcode: stopCollectingMetrics
  workloads:
  - name: 500Nodes
    labels: [performance, quick]
    params: {nodes: 500, initPods: 100, overInitPods: 12, measure: 10, over: 1}
  - name: 5000Nodes_20000Pods
    labels: [performance, full]
    params: {nodes: 5000, initPods: 1052, overInitPods: 12, measure: 26, over: 3}
{{- end}}
`))

// extra is what the benchmark measures beside scheduler_perf, per workload
// run (keyed by the benchmark's name).
type extra struct {
	// PeakRSS is the test process's peak resident set (apiserver and
	// scheduler; etcd runs apart), bytes, from VmHWM reset at the start.
	PeakRSS int64 `json:"peakRSS"`
	// Instances and GuestMemory describe WasmPolicy's pool at the end:
	// instances alive and the sum of their linear memories, bytes.
	Instances   int   `json:"instances,omitempty"`
	GuestMemory int64 `json:"guestMemory,omitempty"`
	// NodesSent, UsageSent and PodsSent are the host's sync counters;
	// UsageUnchanged the usage updates it left unsent (the instance held
	// that usage under an earlier generation).
	NodesSent      int64 `json:"nodesSent,omitempty"`
	UsageSent      int64 `json:"usageSent,omitempty"`
	UsageUnchanged int64 `json:"usageUnchanged,omitempty"`
	PodsSent       int64 `json:"podsSent,omitempty"`
	// TenantUsageSent and ObjectsSent count the tenant usage entries and
	// cluster objects synced to the instances.
	TenantUsageSent int64 `json:"tenantUsageSent,omitempty"`
	ObjectsSent     int64 `json:"objectsSent,omitempty"`
	// Guest is the time spent in each export of the module, summed over
	// policies: calls and milliseconds. GuestMeasured is its part from the
	// first measured pod on (calls and milliseconds; no longest call).
	Guest         map[string]exportTime `json:"guest,omitempty"`
	GuestMeasured map[string]exportTime `json:"guestMeasured,omitempty"`
	// Counters are the scheduler's batching, queue and attempt counters'
	// changes over the whole run ("run") and its measured part
	// ("measured", from the first pod in namespace measure on).
	Counters map[string]schedCounters `json:"counters,omitempty"`
	// Gang is the Gang workload's placement counters (gang_perf_test.go).
	Gang *gangCounts `json:"gang,omitempty"`
}

type exportTime struct {
	Calls int64   `json:"calls"`
	Ms    float64 `json:"ms"`
	// MaxMs is the longest single call, to hold against the call deadline.
	MaxMs float64 `json:"maxMs,omitempty"`
}

// BenchmarkPerfScheduling runs the workloads under every profile. Select
// workloads with -perf-scheduling-label-filter, by size (quick, full), by
// workload (gpu, basic) and by profile (its name): quick,wasm-go or
// full,gpu. Results go to -data-items-dir:
// scheduler_perf's JSON and this package's extra.json.
func BenchmarkPerfScheduling(b *testing.B) {
	dir := b.TempDir()
	ps := profiles(b)
	path := config(b, dir, ps)

	var (
		mu      sync.Mutex
		plugins []*plugin.Plugin
		extras  = map[string]extra{}
	)
	registry := frameworkruntime.Registry{
		NativeName:      NewNative,
		QuotaNativeName: NewQuotaNative,
		plugin.Name: func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			p, err := plugin.New(ctx, obj, h)
			if err == nil {
				mu.Lock()
				plugins = append(plugins, p.(*plugin.Plugin))
				mu.Unlock()
			}
			return p, err
		},
	}
	for name, factory := range gangPlugins {
		registry[name] = factory
		perf.PluginNames = append(perf.PluginNames, name)
	}
	perf.PluginNames = append(perf.PluginNames, NativeName, QuotaNativeName, plugin.Name)
	prepare := func(tCtx tContext) error {
		if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
			tCtx.Logf("cannot reset peak RSS: %v", err)
		}
		name := tCtx.Name()
		// The guest's export times when the first measured pod appears
		// (under mu).
		var (
			guestAtMeasured map[string]exportTime
			measured        bool
		)
		counters := watchCounters(tCtx, func() {
			mu.Lock()
			defer mu.Unlock()
			guestAtMeasured, measured = guestTimes(currentPolicies(plugins)), true
		})
		var binds *bindWatch
		if strings.Contains(name, "/Gang_") {
			binds = watchBindings(tCtx)
		}
		tCtx.Cleanup(func() {
			x := extra{PeakRSS: peakRSS(), Counters: counters.stop()}
			if binds != nil {
				x.Gang = checkGang(tCtx, name, binds)
			}
			checkPlacements(tCtx, name)
			mu.Lock()
			defer mu.Unlock()
			// The plugins of this run (the scheduler closes them when it
			// stops, after this).
			policies := currentPolicies(plugins)
			for _, p := range policies {
				x.Instances += p.Instances()
				for _, m := range p.GuestMemory() {
					x.GuestMemory += int64(m)
				}
				st := p.Stats()
				x.NodesSent += st.NodesSent
				x.UsageSent += st.UsageSent
				x.UsageUnchanged += st.UsageUnchanged
				x.PodsSent += st.PodsSent
				x.TenantUsageSent += st.TenantUsageSent
				x.ObjectsSent += st.ObjectsSent
			}
			x.Guest = guestTimes(policies)
			if measured {
				x.GuestMeasured = guestSince(x.Guest, guestAtMeasured)
			}
			plugins = nil
			extras[name] = x
		})
		return nil
	}
	perf.RunBenchmarkPerfScheduling(b, path, "wasmsched", registry, perf.WithPrepareFn(prepare))

	if out := flag.Lookup("data-items-dir").Value.String(); out != "" {
		data, err := json.MarshalIndent(extras, "", "  ")
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, "extra.json"), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// currentPolicies is the version each of the plugins' slots serves now
// (slots serving none left out).
func currentPolicies(plugins []*plugin.Plugin) []*policy.Policy {
	var out []*policy.Policy
	for _, pl := range plugins {
		for _, s := range pl.Roster().Slots {
			if p := s.Current(); p != nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// guestTimes sums, over policies, the time spent in each export of their
// modules so far; nil when none was called.
func guestTimes(policies []*policy.Policy) map[string]exportTime {
	var out map[string]exportTime
	for _, p := range policies {
		for _, g := range p.Stats().Guest {
			if out == nil {
				out = map[string]exportTime{}
			}
			t := out[g.Export]
			t.Calls += g.Calls
			t.Ms += float64(g.Time.Microseconds()) / 1000
			t.MaxMs = max(t.MaxMs, float64(g.Max.Microseconds())/1000)
			out[g.Export] = t
		}
	}
	return out
}

// guestSince is the export times of end less those of start (calls and
// milliseconds; the longest call is not known for the difference).
func guestSince(end, start map[string]exportTime) map[string]exportTime {
	out := make(map[string]exportTime, len(end))
	for name, e := range end {
		s := start[name]
		if e.Calls > s.Calls {
			out[name] = exportTime{Calls: e.Calls - s.Calls, Ms: e.Ms - s.Ms}
		}
	}
	return out
}

// checkPlacements fails the workload if, under a profile that runs the gpu
// rules, a measured pod landed where the rules forbid: a GPU pod on a node
// without GPUs, a training pod (which wants an A100 or H100 and does not
// accept shared GPUs) on a time-sliced T4. The default profile places
// training pods on T4s: it knows no such rule.
func checkPlacements(tCtx tContext, name string) {
	if strings.Contains(name, "/Quota_") {
		checkQuota(tCtx, name)
		return
	}
	if strings.Contains(name, "/Churn_") {
		checkChurn(tCtx, name)
		return
	}
	if !strings.Contains(name, "/GPU_") || strings.Contains(name, "/GPU_default") {
		return
	}
	// The test's context may be over already when cleanups run.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods, err := tCtx.Client().CoreV1().Pods("measure").List(ctx, metav1.ListOptions{})
	if err != nil {
		tCtx.Errorf("list the measured pods: %v", err)
		return
	}
	checked := 0
	for _, p := range pods.Items {
		node := p.Spec.NodeName
		gpu := strings.HasPrefix(p.Name, "train-") || strings.HasPrefix(p.Name, "notebook-")
		switch {
		case node == "":
		case gpu && strings.HasPrefix(node, "cpu-"):
			tCtx.Errorf("GPU pod %s placed on %s, a node without GPUs", p.Name, node)
		case strings.HasPrefix(p.Name, "train-") && strings.HasPrefix(node, "t4-shared-"):
			tCtx.Errorf("training pod %s placed on %s: the gpu rules refuse shared T4s to it", p.Name, node)
		}
		if gpu {
			checked++
		}
	}
	if checked == 0 {
		tCtx.Errorf("no GPU pod among the %d measured pods: nothing checked", len(pods.Items))
	}
}

// peakRSS reads VmHWM of this process, in bytes; 0 if unavailable.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
