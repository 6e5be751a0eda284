package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/eval"
	"github.com/wasmsched/wasmsched/host/plugin"
	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// agreeGroup is a cluster state (nodes and placed pods from testdata files)
// and the profiles, each a composition of policies, whose decisions on its
// pods are compared.
type agreeGroup struct {
	name     string
	nodes    string   // a testdata file of nodes, relative to the repository
	placed   string   // a testdata file of placed pods, or ""
	pods     []string // testdata files of the pods to schedule
	profiles map[string][]policy
	// labels, if set, schedules each pod once more per value with the
	// label probe=<value> (selecting a hostile probe's misbehaviour).
	labels []string
}

// hostileModes are the probe's misbehaviours (its settings' "at" and
// "how"), one probe each in the hostile profiles, each selected by the pod
// label probe=<at>-<how>.
var hostileModes = [][2]string{
	{"prefilter", "panic"}, {"filter", "panic"}, {"filter", "zero"}, {"filter", "loop"}, {"filter", "wasi"},
	{"score", "panic"}, {"score", "bigscore"}, {"score", "outofrange"}, {"normalize", "panic"},
	{"postfilter", "panic"}, {"reserve", "panic"}, {"permit", "panic"}, {"permit", "code99"},
	{"unreserve", "panic"}, {"prebind", "panic"}, {"postbind", "panic"},
}

func hostileProfile(failurePolicy string) []policy {
	var out []policy
	for _, m := range hostileModes {
		mode := m[0] + "-" + m[1]
		out = append(out, policy{Name: "probe-" + mode, Package: "test/guests/probe", FailurePolicy: failurePolicy, Timeout: "200ms",
			Settings: fmt.Sprintf(`{"at": %q, "how": %q, "when": "probe=%s"}`, m[0], m[1], mode)})
	}
	// A policy that decides when the probes are left out.
	return append(out, policy{Name: "nodepin", Package: "examples/nodepin", Settings: `{"nodes": ["k8s-node2", "k8s-node3"]}`})
}

func agreeGroups(t *testing.T) []agreeGroup {
	probe := func(name, settings string) policy {
		return policy{Name: name, Package: "test/guests/probe", Settings: settings}
	}
	var labels []string
	for _, m := range hostileModes {
		labels = append(labels, m[0]+"-"+m[1])
	}
	return []agreeGroup{{
		name:  "nodepin",
		nodes: "examples/nodepin/testdata/nodes.yaml",
		pods:  []string{"examples/nodepin/testdata/pod.yaml"},
		profiles: map[string][]policy{
			"nodepin":          {{Name: "nodepin", Package: "examples/nodepin"}},
			"nodepin-settings": {{Name: "nodepin", Package: "examples/nodepin", Settings: `{"nodes": ["k8s-node2", "k8s-node3"]}`}},
			"restrict":         {probe("restrict", `{"restrictTo": ["k8s-node1", "k8s-node3"]}`), probe("restrict2", `{"restrictTo": ["k8s-node3", "k8s-node2"]}`)},
			"prefilter-reject": {probe("reject", `{"preFilterReject": "probe: not this pod"}`)},
			"score-error":      {probe("hostname", `{"scoreLabel": "kubernetes.io/hostname"}`)},
			"score-normalize":  {probe("free", `{"scoreFree": "pods", "normalize": true}`), probe("count", `{"countNodes": true}`)},
			"permit-wait":      {probe("wait", `{"permit": "wait"}`), probe("allow", `{}`)},
			"permit-reject":    {probe("allow", `{}`), probe("reject", `{"permit": "reject"}`)},
			"hostile-fail":     hostileProfile("Fail"),
			"hostile-ignore":   hostileProfile("Ignore"),
		},
		labels: labels,
	}, {
		name:   "gpu",
		nodes:  "examples/gpu/testdata/nodes.yaml",
		placed: "examples/gpu/testdata/pods.yaml",
		pods: []string{"examples/gpu/testdata/pod.yaml", "examples/gpu/testdata/pod-cpu.yaml",
			"examples/gpu/testdata/pod-inference.yaml", "examples/gpu/testdata/pod-shared.yaml"},
		profiles: map[string][]policy{
			"gpu":        {{Name: "gpu", Package: "examples/gpu"}},
			"gpu-spread": {{Name: "gpu", Package: "examples/gpu", Settings: readTestdata(t, "examples/gpu/testdata/spread.json")}},
			"composed": {
				{Name: "gpu", Package: "examples/gpu", Weight: 3},
				{Name: "zone", Package: "examples/zone", Settings: readTestdata(t, "examples/zone/testdata/settings.json")},
				{Name: "free", Package: "test/guests/probe", Weight: 2, Settings: `{"scoreFree": "cpu", "normalize": true}`},
			},
		},
	}, {
		name:   "zone",
		nodes:  "examples/zone/testdata/nodes.yaml",
		placed: "examples/zone/testdata/pods.yaml",
		pods:   []string{"examples/zone/testdata/pod.yaml"},
		profiles: map[string][]policy{
			"zone":         {{Name: "zone", Package: "examples/zone", Settings: readTestdata(t, "examples/zone/testdata/settings.json")}},
			"zone-require": {{Name: "zone", Package: "examples/zone", Settings: readTestdata(t, "examples/zone/testdata/settings-require.json")}},
		},
	}, {
		name:     "edge",
		nodes:    "examples/edge/testdata/nodes.yaml",
		pods:     []string{"examples/edge/testdata/pod.yaml", "examples/edge/testdata/pod-web.yaml"},
		profiles: map[string][]policy{"edge": {{Name: "edge", Package: "examples/edge"}}},
	}, {
		name:     "gang",
		nodes:    "examples/gang/testdata/nodes.yaml",
		placed:   "examples/gang/testdata/pods.yaml",
		pods:     []string{"examples/gang/testdata/pod.yaml", "examples/gang/testdata/pod-malformed.yaml"},
		profiles: map[string][]policy{"gang": {{Name: "gang", Package: "examples/gang", Settings: readTestdata(t, "examples/gang/testdata/settings.json")}}},
	}, {
		name:     "gang-complete",
		nodes:    "examples/gang/testdata/nodes.yaml",
		placed:   "examples/gang/testdata/pods-complete.yaml",
		pods:     []string{"examples/gang/testdata/pod.yaml"},
		profiles: map[string][]policy{"gang": {{Name: "gang", Package: "examples/gang", Settings: readTestdata(t, "examples/gang/testdata/settings.json")}}},
	}}
}

// TestEvalAgreesWithPlugin runs the same scenarios through `wasmsched eval`'s
// evaluator and through the WasmPolicy plugin in a real kube-scheduler on a
// real control plane (its cache fed by informers, its profiles' frameworks
// running Filter and Score, the plugin's Reserve, Permit and binding calls),
// and asserts identical verdicts, reasons, scores, selected node (ties
// allowed either way, as the scheduler breaks them at random), PostFilter
// nomination and Permit verdict. The scenarios are the examples' testdata
// and every hostile probe misbehaviour, under failurePolicy Fail and Ignore.
func TestEvalAgreesWithPlugin(t *testing.T) {
	ctx := context.Background()
	c := startCluster(t, nil)
	c.namespace(policyNamespace)
	scenarios := 0
	for _, g := range agreeGroups(t) {
		t.Run(g.name, func(t *testing.T) {
			scenarios += agreeGroupRun(t, ctx, c, g)
		})
	}
	t.Logf("%d scenarios compared", scenarios)
}

func agreeGroupRun(t *testing.T, ctx context.Context, c *cluster, g agreeGroup) int {
	root := testwasm.Root(t)
	nodes, err := eval.ReadNodes(filepath.Join(root, g.nodes))
	if err != nil {
		t.Fatal(err)
	}
	var placed []*v1.Pod
	if g.placed != "" {
		if placed, err = eval.ReadPods(filepath.Join(root, g.placed)); err != nil {
			t.Fatal(err)
		}
	}
	// The cluster state, through the API server; eval gets the objects as
	// the API server returned them.
	for i, n := range nodes {
		n = n.DeepCopy()
		n.ResourceVersion = ""
		created, err := c.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = created
	}
	for i, p := range placed {
		c.namespace(p.Namespace)
		p = p.DeepCopy()
		p.ResourceVersion, p.UID = "", ""
		created, err := c.client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		placed[i] = created
	}
	defer func() {
		zero := int64(0)
		for _, p := range placed {
			_ = c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
		for _, n := range nodes {
			_ = c.client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		}
	}()

	// One scheduler with a profile per composition; its plugins are kept
	// by profile to call Reserve, Permit and the binding points.
	var (
		mu      sync.Mutex
		plugins = map[string]*plugin.Plugin{}
	)
	factory := func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := plugin.New(ctx, obj, h)
		if err == nil {
			mu.Lock()
			plugins[h.ProfileName()] = p.(*plugin.Plugin)
			mu.Unlock()
		}
		return p, err
	}
	ps, err := controlplane.PrepareScheduler(ctx, controlplane.SchedulerOptions{
		Kubeconfig:      c.kubeconfig,
		ConfigFile:      agreeConfig(t, c.kubeconfig, g.profiles),
		RegistryOptions: []app.Option{app.WithPlugin(plugin.Name, factory)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Stop()
	cache := ps.Scheduler.Cache
	if n := cache.NodeCount(); n != len(nodes) {
		t.Fatalf("scheduler cache has %d nodes, want %d", n, len(nodes))
	}

	var pods []*v1.Pod
	for _, f := range g.pods {
		p, err := eval.ReadPod(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
		for _, l := range g.labels {
			lp := p.DeepCopy()
			lp.Name += "-" + l
			lp.UID += types.UID("-" + l)
			if lp.Labels == nil {
				lp.Labels = map[string]string{}
			}
			lp.Labels["probe"] = l
			pods = append(pods, lp)
		}
	}

	n := 0
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range g.profiles {
			if !yield(k) {
				return
			}
		}
	}) {
		policies := g.profiles[name]
		ev := agreeEvaluator(t, ctx, policies)
		fw := ps.Scheduler.Profiles[name]
		pl := plugins[name]
		if fw == nil || pl == nil {
			t.Fatalf("profile %s: no framework or plugin", name)
		}
		for _, pod := range pods {
			want, err := ev.Evaluate(ctx, eval.Input{Pod: pod, Nodes: nodes, Pods: placed})
			if err != nil {
				t.Fatal(err)
			}
			got := pluginReport(t, ctx, ps, fw, pl, pod, want.Selected)
			compareReports(t, name+" "+pod.Name, normalize(want), normalize(got))
			n++
		}
		ev.Close(ctx)
	}
	return n
}

// agreeConfig writes a scheduler configuration with one profile per
// composition, WasmPolicy its only plugin besides the queue sort and the
// binder, weight 1 so that a node's total score is the composition's.
func agreeConfig(t *testing.T, kubeconfig string, profiles map[string][]policy) string {
	var ps []any
	for name, policies := range profiles {
		var args []any
		for _, p := range policies {
			args = append(args, p.args(t))
		}
		ps = append(ps, map[string]any{
			"schedulerName": name,
			"plugins": map[string]any{
				"multiPoint": map[string]any{
					"enabled":  []any{map[string]any{"name": plugin.Name, "weight": 1}},
					"disabled": []any{map[string]any{"name": "*"}},
				},
				"queueSort": map[string]any{"enabled": []any{map[string]any{"name": "PrioritySort"}}},
				"bind":      map[string]any{"enabled": []any{map[string]any{"name": "DefaultBinder"}}},
			},
			"pluginConfig": []any{map[string]any{"name": plugin.Name, "args": map[string]any{"namespace": policyNamespace, "policies": args}}},
		})
	}
	return schedulerConfig(t, t.TempDir(), kubeconfig, nil, func(cfg map[string]any) { cfg["profiles"] = ps })
}

// agreeEvaluator loads policies for eval as the plugin loads them.
func agreeEvaluator(t *testing.T, ctx context.Context, policies []policy) *eval.Evaluator {
	var specs []eval.PolicySpec
	for _, p := range policies {
		cfg := engine.Config{}
		if p.Timeout != "" {
			d, err := time.ParseDuration(p.Timeout)
			if err != nil {
				t.Fatal(err)
			}
			cfg.CallTimeout = d
		}
		specs = append(specs, eval.PolicySpec{Name: p.Name, Wasm: testwasm.Bytes(t, p.Package), Settings: []byte(p.Settings),
			Weight: int64(p.Weight), FailurePolicy: p.FailurePolicy, Engine: cfg})
	}
	ev, err := eval.Load(ctx, specs)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// pluginReport decides pod's cycle with the scheduler: SchedulePod (the
// scheduler's own algorithm, which also refreshes its snapshot from the
// cache) for the selected node, then the framework's PreFilter, Filter and
// Score on every node for the verdicts and scores, the plugin's PostFilter
// when no node fits, and its Reserve, Permit, PreBind and PostBind or
// Unreserve on selected (eval's choice, checked to be one of the best).
func pluginReport(t *testing.T, ctx context.Context, ps *controlplane.PreparedScheduler, fw framework.Framework, pl *plugin.Plugin, pod *v1.Pod, selected string) *eval.Report {
	t.Helper()
	rep := &eval.Report{Pod: pod.Namespace + "/" + pod.Name}
	res, schedErr := schedulePod(ctx, ps.Scheduler, fw, pod)

	state := framework.NewCycleState()
	all, err := fw.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[string]*fwk.Status{}
	var feasible []fwk.NodeInfo
	preRes, s, unscheduled := fw.RunPreFilterPlugins(ctx, state, pod)
	if !s.IsSuccess() {
		if !s.IsRejected() {
			t.Fatalf("PreFilter: %v", s.AsError())
		}
		for _, ni := range all {
			statuses[ni.Node().Name] = s
		}
	} else {
		for _, ni := range all {
			if !preRes.AllNodes() && !preRes.NodeNames.Has(ni.Node().Name) {
				// What the scheduler writes for the nodes PreFilter left out.
				statuses[ni.Node().Name] = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sets.List(unscheduled)))
				continue
			}
			if fs := fw.RunFilterPlugins(ctx, state, pod, ni); !fs.IsSuccess() {
				statuses[ni.Node().Name] = fs
				continue
			}
			feasible = append(feasible, ni)
		}
	}
	scores := map[string]int64{}
	if len(feasible) > 1 {
		if s := fw.RunPreScorePlugins(ctx, state, pod, feasible); !s.IsSuccess() && !s.IsSkip() {
			t.Fatalf("PreScore: %v", s.AsError())
		}
		list, s := fw.RunScorePlugins(ctx, state, pod, feasible)
		if !s.IsSuccess() {
			// The framework wraps the plugin's reason:
			// running Score plugins: plugin "WasmPolicy" failed with: <reason>.
			rep.Error = s.Message()
		}
		for _, ns := range list {
			scores[ns.Name] = ns.TotalScore
		}
	}
	for _, ni := range all {
		name := ni.Node().Name
		nr := eval.NodeResult{Name: name, Code: "Success", Reasons: []string{}}
		if s := statuses[name]; s != nil {
			nr.Code, nr.Reasons = s.Code().String(), s.Reasons()
		} else if v, ok := scores[name]; ok && rep.Error == "" {
			nr.Score = &v
		}
		rep.Nodes = append(rep.Nodes, nr)
	}

	switch {
	case len(feasible) == 0:
		if _, ok := schedErr.(*framework.FitError); !ok {
			t.Errorf("%s: SchedulePod: %v, want a FitError", pod.Name, schedErr)
		}
		m := framework.NewDefaultNodeToStatus()
		for n, s := range statuses {
			m.Set(n, s)
		}
		if r, _ := pl.PostFilter(ctx, state, pod, m); r != nil && r.NominatingInfo != nil {
			rep.Nominated = r.NominatingInfo.NominatedNodeName
		}
		rep.Permit = eval.Verdict{Code: "Skip", Reasons: []string{"no node passed Filter"}}
		return rep
	case rep.Error != "":
		if schedErr == nil {
			t.Errorf("%s: SchedulePod chose %s, want the cycle to fail", pod.Name, res.SuggestedHost)
		}
		rep.Permit = eval.Verdict{Code: "Skip", Reasons: []string{"the scheduling cycle failed"}}
		return rep
	case schedErr != nil:
		t.Fatalf("%s: SchedulePod: %v", pod.Name, schedErr)
	}

	// The best nodes: the scheduler's choice must be one, and so must
	// eval's, on which the rest of the cycle runs.
	best := []string{feasible[0].Node().Name}
	if len(feasible) > 1 {
		best = nil
		top := int64(-1)
		for _, ni := range feasible {
			switch v := scores[ni.Node().Name]; {
			case v > top:
				top, best = v, []string{ni.Node().Name}
			case v == top:
				best = append(best, ni.Node().Name)
			}
		}
	}
	if !slices.Contains(best, res.SuggestedHost) {
		t.Errorf("%s: the scheduler chose %s, not one of the best %v", pod.Name, res.SuggestedHost, best)
	}
	if !slices.Contains(best, selected) {
		t.Errorf("%s: eval selected %q, not one of the best %v", pod.Name, selected, best)
		return rep
	}
	rep.Selected = selected
	rep.Permit = pluginBind(ctx, state, pl, pod, selected)
	return rep
}

// pluginBind runs the rest of the cycle through the plugin as the
// scheduler would, and returns the first verdict that stopped the pod.
func pluginBind(ctx context.Context, state fwk.CycleState, pl *plugin.Plugin, pod *v1.Pod, node string) eval.Verdict {
	var wait time.Duration
	s := pl.Reserve(ctx, state, pod, node)
	if s.IsSuccess() {
		s, wait = pl.Permit(ctx, state, pod, node)
	}
	if s.IsSuccess() {
		if s = preBindPreFlight(ctx, pl, state, pod, node); s.IsSkip() {
			s = nil
		} else if s.IsSuccess() {
			s = pl.PreBind(ctx, state, pod, node)
		}
	}
	switch {
	case s.IsSuccess():
		pl.PostBind(ctx, state, pod, node)
		return eval.Verdict{Code: "Success", Reasons: []string{}}
	case s.IsWait():
		return eval.Verdict{Code: "Wait", Reasons: s.Reasons(), Wait: wait.String()}
	}
	pl.Unreserve(ctx, state, pod, node)
	return eval.Verdict{Code: s.Code().String(), Reasons: s.Reasons()}
}

var stoppedAfter = regexp.MustCompile(` \(stopped after [^)]*\)`)

// normalize removes what timing decides from a report's reasons (how late
// a call that overran its deadline stopped) and sorts its nodes by name.
func normalize(r *eval.Report) *eval.Report {
	out := *r
	out.Nodes = slices.Clone(r.Nodes)
	for i := range out.Nodes {
		rs := make([]string, len(out.Nodes[i].Reasons))
		for j, s := range out.Nodes[i].Reasons {
			rs[j] = stoppedAfter.ReplaceAllString(s, "")
		}
		out.Nodes[i].Reasons = rs
	}
	slices.SortFunc(out.Nodes, func(a, b eval.NodeResult) int { return strings.Compare(a.Name, b.Name) })
	out.Error = stoppedAfter.ReplaceAllString(out.Error, "")
	out.Permit.Reasons = slices.Clone(r.Permit.Reasons)
	for j, s := range out.Permit.Reasons {
		out.Permit.Reasons[j] = stoppedAfter.ReplaceAllString(s, "")
	}
	return &out
}

// compareReports asserts that eval's report (want) and the plugin's (got)
// agree: every node's verdict, reasons and score, the cycle's failure
// (the framework wraps the plugin's reason), the nomination, the selected
// node and the Permit verdict.
func compareReports(t *testing.T, scenario string, want, got *eval.Report) {
	t.Helper()
	if len(want.Nodes) != len(got.Nodes) {
		t.Errorf("%s: eval has %d nodes, the scheduler %d", scenario, len(want.Nodes), len(got.Nodes))
		return
	}
	for i, w := range want.Nodes {
		g := got.Nodes[i]
		if w.Name != g.Name || w.Code != g.Code || !slices.Equal(w.Reasons, g.Reasons) {
			t.Errorf("%s: node %s: eval %s %q, plugin %s: %s %q", scenario, w.Name, w.Code, w.Reasons, g.Name, g.Code, g.Reasons)
		}
		if (w.Score == nil) != (g.Score == nil) || (w.Score != nil && *w.Score != *g.Score) {
			t.Errorf("%s: node %s: eval score %s, plugin %s", scenario, w.Name, scoreText(w.Score), scoreText(g.Score))
		}
	}
	// When Score fails on several nodes, which failure the scheduler
	// reports depends on its goroutines (eval reports the first node in
	// input order): the node names in the failure are not compared.
	wantErr, gotErr := want.Error, got.Error
	for _, n := range want.Nodes {
		wantErr = strings.ReplaceAll(wantErr, n.Name, "<node>")
		gotErr = strings.ReplaceAll(gotErr, n.Name, "<node>")
	}
	if (wantErr == "") != (gotErr == "") || !strings.Contains(gotErr, wantErr) {
		t.Errorf("%s: eval's cycle failure %q, the scheduler's %q", scenario, want.Error, got.Error)
	}
	if want.Nominated != got.Nominated || want.Selected != got.Selected {
		t.Errorf("%s: eval nominated %q and selected %q, the plugin %q and %q", scenario, want.Nominated, want.Selected, got.Nominated, got.Selected)
	}
	if w, g := want.Permit, got.Permit; w.Code != g.Code || !slices.Equal(w.Reasons, g.Reasons) || w.Wait != g.Wait {
		t.Errorf("%s: permit: eval %s %q %s, plugin %s %q %s", scenario, w.Code, w.Reasons, w.Wait, g.Code, g.Reasons, g.Wait)
	}
}

func scoreText(v *int64) string {
	if v == nil {
		return "none"
	}
	return fmt.Sprint(*v)
}

// readTestdata reads a file of the repository, for settings.
func readTestdata(t *testing.T, path string) string {
	b, err := os.ReadFile(filepath.Join(testwasm.Root(t), path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
