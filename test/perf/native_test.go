package perf

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/host/eval"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// TestNativeTwin checks that Native gives the verdicts, reasons and
// normalised scores of the gpu example built as wasm, node by node, for the
// example's own test pods and the benchmark's, on the example's cluster plus
// the benchmark's node kinds. A benchmark comparing the two is only fair
// while this passes.
func TestNativeTwin(t *testing.T) {
	ctx := context.Background()
	ev, err := eval.Load(ctx, []eval.PolicySpec{{Name: "gpu", Wasm: testwasm.Bytes(t, "examples/gpu")}})
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close(ctx)

	gpuTestdata := filepath.Join(testwasm.Root(t), "examples", "gpu", "testdata")
	nodes, err := eval.ReadNodes(filepath.Join(gpuTestdata, "nodes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The benchmark's node templates have generateName only.
	for _, file := range []string{"node-cpu.yaml", "node-a100.yaml", "node-t4-shared.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		n := &v1.Node{}
		if err := yaml.UnmarshalStrict(data, n); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		n.Name = n.GenerateName + "0"
		n.Status.Allocatable = n.Status.Capacity // API defaulting
		nodes = append(nodes, n)
	}
	placed, err := eval.ReadPods(filepath.Join(gpuTestdata, "pods.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pods []*v1.Pod
	for _, path := range []string{
		filepath.Join(gpuTestdata, "pod.yaml"), filepath.Join(gpuTestdata, "pod-inference.yaml"),
		filepath.Join(gpuTestdata, "pod-shared.yaml"), filepath.Join(gpuTestdata, "pod-cpu.yaml"),
		filepath.Join("testdata", "pod-train.yaml"), filepath.Join("testdata", "pod-notebook.yaml"),
		filepath.Join("testdata", "pod-cpu.yaml"),
	} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		p := &v1.Pod{}
		if err := yaml.UnmarshalStrict(data, p); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if p.Name == "" {
			p.Name = p.GenerateName + "0"
		}
		pods = append(pods, p)
	}
	for _, pod := range pods {
		t.Run(pod.Name, func(t *testing.T) {
			in := eval.Input{Pod: pod, Nodes: nodes, Pods: placed}
			rep, err := ev.Evaluate(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			infos, err := eval.NodeInfos(in)
			if err != nil {
				t.Fatal(err)
			}
			got := native(t, pod, infos)
			if len(rep.Nodes) != len(got) {
				t.Fatalf("wasm judged %d nodes, native %d", len(rep.Nodes), len(got))
			}
			passed := 0
			for i, w := range rep.Nodes {
				g := got[i]
				if g.Name != w.Name || g.Code != w.Code || !slices.Equal(g.Reasons, nonNil(w.Reasons)) {
					t.Errorf("node %s: native %s %q, wasm %s %q", w.Name, g.Code, g.Reasons, w.Code, w.Reasons)
				}
				if w.Score != nil {
					passed++
					if g.Score == nil || *g.Score != *w.Score {
						t.Errorf("node %s: native score %v, wasm %d", w.Name, deref(g.Score), *w.Score)
					}
				}
			}
			if passed == 0 && pod.Name != "cpu-0" {
				t.Errorf("no node passed: the comparison of scores is empty")
			}
		})
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func deref(p *int64) any {
	if p == nil {
		return "none"
	}
	return *p
}

// native runs Native as the framework would, and shapes its verdicts like
// host/eval's report.
func native(t *testing.T, pod *v1.Pod, infos []fwk.NodeInfo) []eval.NodeResult {
	t.Helper()
	ctx := context.Background()
	pl := &Native{}
	cs := framework.NewCycleState()
	_, pre := pl.PreFilter(ctx, cs, pod, infos)
	out := make([]eval.NodeResult, len(infos))
	var feasible fwk.NodeScoreList
	for i, ni := range infos {
		out[i] = eval.NodeResult{Name: ni.Node().Name, Code: "Success", Reasons: []string{}}
		s := pre
		switch {
		case s.IsSkip():
			s = nil
		case s.IsSuccess():
			s = pl.Filter(ctx, cs, pod, ni)
		}
		if !s.IsSuccess() {
			out[i].Code, out[i].Reasons = s.Code().String(), s.Reasons()
			continue
		}
		v, st := pl.Score(ctx, cs, pod, ni)
		if !st.IsSuccess() {
			t.Fatalf("score %s: %v", ni.Node().Name, st)
		}
		feasible = append(feasible, fwk.NodeScore{Name: ni.Node().Name, Score: v})
	}
	if st := pl.NormalizeScore(ctx, cs, pod, feasible); !st.IsSuccess() {
		t.Fatalf("normalize: %v", st)
	}
	for _, s := range feasible {
		for i := range out {
			if out[i].Name == s.Name {
				out[i].Score = &s.Score
			}
		}
	}
	return out
}

// TestConfig renders the benchmark's scheduler_perf configuration and checks
// its test cases: every workload under every profile, profiles adjacent, the
// second round in reverse order.
func TestConfig(t *testing.T) {
	old := *rounds
	*rounds = 2
	defer func() { *rounds = old }()
	ps := []profile{
		{Name: "default", Families: map[string]schedulerSetup{familyGPU: {}, familyQuota: {}}},
		{Name: "native", Families: map[string]schedulerSetup{familyGPU: {Plugin: NativeName}, familyQuota: {Plugin: QuotaNativeName, Args: quotaSettings}}},
		{Name: "wasm-go", Families: map[string]schedulerSetup{
			familyGPU:   {Plugin: "WasmPolicy", Policy: "gpu", Wasm: "/x/gpu.wasm"},
			familyQuota: {Plugin: "WasmPolicy", Policy: "quota", Wasm: "/x/quota.wasm", Settings: quotaSettings},
		}},
	}
	if gangAvailable {
		ps[0].Families[familyGang] = schedulerSetup{}
		ps[1].Families[familyGang] = schedulerSetup{Plugin: gangNativeName, Args: gangSettings, NoTopologyGenerator: true}
		ps[2].Families[familyGang] = schedulerSetup{Plugin: "WasmPolicy", Policy: "topology", Wasm: "/x/topology.wasm", Settings: gangSettings, NoTopologyGenerator: true}
	}
	data, err := os.ReadFile(config(t, t.TempDir(), ps))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name                string          `json:"name"`
		Labels              []string        `json:"labels"`
		FeatureGates        map[string]bool `json:"featureGates"`
		SchedulerConfigPath string          `json:"schedulerConfigPath"`
		Workloads           []struct {
			Name string `json:"name"`
		} `json:"workloads"`
	}
	if err := yaml.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cases {
		names = append(names, c.Name)
		// Two sizes each (500 and 5000 nodes), the GPU mix a third (15 000).
		want := 2
		if strings.HasPrefix(c.Name, "GPU_") {
			want = 3
		}
		if _, err := os.Stat(c.SchedulerConfigPath); err != nil || len(c.Workloads) != want || len(c.Labels) != 2 {
			t.Errorf("%s: scheduler config %v, %d workloads, labels %v", c.Name, err, len(c.Workloads), c.Labels)
		}
		checkSchedulerConfig(t, c.Name, c.SchedulerConfigPath)
		gang := strings.HasPrefix(c.Name, "Gang_")
		if gates := c.FeatureGates; gang != (gates["GenericWorkload"] && gates["TopologyAwareWorkloadScheduling"]) {
			t.Errorf("%s: feature gates %v", c.Name, gates)
		}
	}
	want := []string{"GPU_default", "GPU_native", "GPU_wasm-go", "GPU_wasm-go_2", "GPU_native_2", "GPU_default_2",
		"Basic_default", "Basic_native", "Basic_wasm-go", "Basic_wasm-go_2", "Basic_native_2", "Basic_default_2",
		"Churn_default", "Churn_native", "Churn_wasm-go", "Churn_wasm-go_2", "Churn_native_2", "Churn_default_2",
		"Quota_default", "Quota_native", "Quota_wasm-go", "Quota_wasm-go_2", "Quota_native_2", "Quota_default_2"}
	if gangAvailable {
		want = slices.Insert(want, 18, "Gang_default", "Gang_native", "Gang_wasm-go", "Gang_wasm-go_2", "Gang_native_2", "Gang_default_2")
	}
	if !slices.Equal(names, want) {
		t.Fatalf("test cases %v, want %v", names, want)
	}
}

// checkSchedulerConfig checks that a rendered scheduler configuration is
// YAML whose plugin arguments and policy settings are the ones the profile
// gives: the quota settings survive being spliced into YAML.
func checkSchedulerConfig(t *testing.T, name, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Profiles   []struct {
			SchedulerName string `json:"schedulerName"`
			Plugins       any    `json:"plugins"`
			PluginConfig  []struct {
				Name string         `json:"name"`
				Args map[string]any `json:"args"`
			} `json:"pluginConfig"`
		} `json:"profiles"`
	}
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatalf("%s: %s: %v", name, path, err)
	}
	// Batching possible: PodTopologySpread without default constraints.
	pc := cfg.Profiles[0].PluginConfig
	if len(pc) == 0 || pc[0].Name != "PodTopologySpread" || pc[0].Args["defaultingType"] != "List" {
		t.Errorf("%s: plugin config %v, want PodTopologySpread first with defaultingType List", name, pc)
		return
	}
	// Under the topology rules the scheduler's own placement generator is
	// off (it asks only the first); under default it is upstream's.
	if strings.HasPrefix(name, "Gang_") {
		plugins, _ := json.Marshal(cfg.Profiles[0].Plugins)
		disabled := strings.Contains(string(plugins), `"disabled":[{"name":"TopologyPlacementGenerator"}]`)
		if disabled == strings.HasPrefix(name, "Gang_default") {
			t.Errorf("%s: plugins %s: TopologyPlacementGenerator disabled %v", name, plugins, disabled)
		}
	}
	settings := quotaSettings
	switch {
	case strings.HasPrefix(name, "Gang_") && !strings.HasPrefix(name, "Gang_default"):
		settings = gangSettings
	case !strings.HasPrefix(name, "Quota_") || strings.HasPrefix(name, "Quota_default"):
		return
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(settings), &want); err != nil {
		t.Fatal(err)
	}
	pc = pc[1:]
	if len(pc) != 1 {
		t.Fatalf("%s: plugin config %v", name, pc)
	}
	got := pc[0].Args
	if pc[0].Name == "WasmPolicy" {
		got = got["policies"].([]any)[0].(map[string]any)["settings"].(map[string]any)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: settings %v, want %v", name, got, want)
	}
}

// TestSelected checks which profiles and families a label filter selects,
// so that a run builds only the modules it needs.
func TestSelected(t *testing.T) {
	old := perf.PerfSchedulingLabelFilter
	defer func() { perf.PerfSchedulingLabelFilter = old }()
	for filter, want := range map[string][]string{
		"quick,quota,native":  {"native", familyQuota},
		"quick,gpu,wasm-go":   {"wasm-go", familyGPU},
		"full,basic,wasm-go":  {"wasm-go", familyGPU},
		"quick,churn,native":  {"native", familyGPU},
		"quick,gang,wasm-go":  {"wasm-go", familyGang},
		"full,-slow":          {"default", "native", "wasm-go", "wasm-tinygo", familyGPU, familyQuota, familyGang},
		"full,-wasm-tinygo":   {"default", "native", "wasm-go", familyGPU, familyQuota, familyGang},
		"quick,+quota,-basic": {"default", "native", "wasm-go", "wasm-tinygo", familyQuota},
	} {
		perf.PerfSchedulingLabelFilter = filter
		var got []string
		for _, name := range []string{"default", "native", "wasm-go", "wasm-tinygo", familyGPU, familyQuota, familyGang} {
			if selected(name) {
				got = append(got, name)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: selected %v, want %v", filter, got, want)
		}
	}
}
