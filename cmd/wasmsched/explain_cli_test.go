package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/host/explain"
	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// TestExplain runs explain and ui against one cluster: the demo, placed
// by the scheduler, and profiles whose policies fail or write markup.
func TestExplain(t *testing.T) {
	ec := startExplainCluster(t)

	t.Run("pending", func(t *testing.T) {
		code, out, errs := ec.explainCLI("-n", "demo", "train-h100")
		t.Logf("%s", out)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		for _, want := range []string{explain.Note, "now: Pending; the scheduler says: Unschedulable: 0/6 nodes are available",
			"policies would choose: unschedulable: gpu: ", "NVIDIA-H100-80GB-HBM3", "6 nodes, 0 feasible", "gpu(x2)", "zone(x1)", "gang(x1)"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q", want)
			}
		}
	})
	t.Run("one node", func(t *testing.T) {
		// The operator's guide's example.
		code, out, errs := ec.explainCLI("-n", "demo", "train-h100", "--node", "a-gpu-1")
		t.Logf("%s", out)
		if code != 0 || !strings.Contains(out, "pod demo/train-h100 on node a-gpu-1: ") ||
			!strings.Contains(out, "gpu: wrong GPU product: want NVIDIA-H100-80GB-HBM3, node has NVIDIA-A100-SXM4-80GB") {
			t.Errorf("--node a-gpu-1: exit %d: %s", code, errs)
		}
	})
	t.Run("bound", func(t *testing.T) {
		code, out, errs := ec.explainCLI("demo/web-1", "-o", "json", "--limit", "0")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var res explain.Result
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		if res.Node == "" || res.Chosen == "" || res.TotalNodes != 6 || len(res.Nodes) != 6 {
			t.Fatalf("bound pod: node %q, chosen %q, %d of %d nodes", res.Node, res.Chosen, len(res.Nodes), res.TotalNodes)
		}
		scored := 0
		for _, n := range res.Nodes {
			if n.Code != "Success" {
				continue
			}
			scored++
			if n.Score == nil {
				t.Errorf("feasible node %s has no total score", n.Name)
			}
			for k, v := range n.Policies {
				if res.Policies[k].Name != "gang" && (v.Normalized == nil || v.Raw == nil) {
					t.Errorf("node %s, policy %s: raw %v normalised %v", n.Name, res.Policies[k].Name, v.Raw, v.Normalized)
				}
			}
		}
		if scored < 2 || scored != res.Feasible {
			t.Errorf("%d nodes scored, %d feasible", scored, res.Feasible)
		}
		code, out, errs = ec.explainCLI("demo/web-1", "--node", res.Chosen)
		t.Logf("%s", out)
		if code != 0 || !strings.Contains(out, "chosen: true") || !strings.Contains(out, "POLICY  REVISION") {
			t.Errorf("--node: exit %d: %s%s", code, out, errs)
		}
		code, out, _ = ec.explainCLI("demo/web-1", "-o", "yaml", "--limit", "2")
		if code != 0 || !strings.Contains(out, "totalNodes: 6") || strings.Count(out, "\n  - code:") != 2 {
			t.Errorf("-o yaml --limit 2: exit %d:\n%s", code, out)
		}
	})
	t.Run("failing policies", func(t *testing.T) {
		for _, c := range []struct{ pod, want, failure string }{
			{"trap-pod", "trap", "filter: wasm error: unreachable: panic: probe: deliberate panic in filter"},
			{"loop-pod", "loop", "filter: deadline of 500ms exceeded"},
			{"oom-pod", "oom", "limit 58720256 of memoryLimit 67108864: the memory limit was reached"},
		} {
			code, out, errs := ec.explainCLI("-n", "demo", c.pod)
			t.Logf("%s: %s", c.pod, out)
			if code != 0 {
				t.Fatalf("%s: exit %d: %s", c.pod, code, errs)
			}
			if !strings.Contains(out, "policy failure: policy "+c.want+"@") || !strings.Contains(out, c.failure) {
				t.Errorf("%s: no failure of policy %s reported (%s)", c.pod, c.want, c.failure)
			}
			if !strings.Contains(out, "not evaluated: broken: no revision serves") {
				t.Errorf("%s: the broken policy is not reported", c.pod)
			}
		}
	})
	t.Run("quota", func(t *testing.T) {
		// The quota policy reads the ElasticQuota and team-a's usage (qa-1,
		// bound): qa-2 would exceed the tenant's max.
		code, out, errs := ec.explainCLI("-n", "team-a", "qa-2")
		t.Logf("%s", out)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		for _, want := range []string{"profile quota: quota ", "policies would choose: unschedulable: quota: tenant team-a would exceed its max of cpu: uses 1, pod requests 1, max 1"} {
			if !strings.Contains(out, want) {
				t.Errorf("quota: output lacks %q", want)
			}
		}
	})
	t.Run("static", func(t *testing.T) { testExplainStatic(t, ec) })
	t.Run("what-if", func(t *testing.T) {
		probe, err := os.ReadFile(testwasm.Path(t, "test/guests/probe"))
		if err != nil {
			t.Fatal(err)
		}
		// gpu replaced by the probe (in the namespace's chunks), which
		// lets every pod through: the pods gpu holds pending would move.
		code, out, errs := ec.explainCLI("-n", "demo", "train-h100", "--revision", "gpu="+source.Digest(probe), "--settings", "gpu={}")
		t.Logf("%s", out)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		for _, want := range []string{"what-if: serving revisions choose unschedulable: gpu: ", "; with the what-if ",
			"pending pods of the profile would change", "  demo/train-h100: unschedulable: gpu: ", "  demo/train-huge: unschedulable: ", "settings {}"} {
			if !strings.Contains(out, want) {
				t.Errorf("what-if output lacks %q", want)
			}
		}
	})
	t.Run("bad input", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"-n", "demo", "nope"}, "pod demo/nope not found"},
			{[]string{"demo/elsewhere"}, `static policies of profile "no-such-scheduler" in wasmsched-system/wasmsched-status, and no SchedulingPolicy in namespace wasmsched-system is served by it`},
			{[]string{"demo/web-1", "--node", "nowhere"}, `node "nowhere" is not among`},
			{[]string{"demo/web-1", "--revision", "gpu=ffff"}, `no revision of gpu has digest "ffff"`},
			{[]string{"demo/web-1", "--revision", "nosuch=ab"}, `policy "nosuch" does not serve profile default-scheduler`},
			{[]string{"demo/web-1", "--policy", "gpu=/nonexistent.wasm"}, `what-if for gpu: open /nonexistent.wasm`},
			{[]string{"demo/web-1", "--settings", "gpu={"}, `--settings for gpu: not valid JSON`},
		} {
			code, out, errs := ec.explainCLI(c.args...)
			if code != 1 || !strings.Contains(errs, c.want) {
				t.Errorf("explain %v: exit %d, stderr %q, want 1 and %q (stdout %s)", c.args, code, errs, c.want, out)
			}
		}
	})
	t.Run("too large", func(t *testing.T) {
		c, err := connect(ec.kubeconfig, "wasmsched-system")
		if err != nil {
			t.Fatal(err)
		}
		x := &explain.Client{Kube: c.client, Dynamic: c.dyn, Namespace: "wasmsched-system", MaxNodes: 5}
		if _, err := x.ReadCluster(context.Background()); err == nil || !strings.Contains(err.Error(), "more than 5 nodes") {
			t.Errorf("6 nodes read with a bound of 5: %v", err)
		}
	})
	t.Run("rights", func(t *testing.T) {
		none := ec.restricted(t, "nobody", nil)
		code, _, errs := runCLI("explain", "demo/web-1", "--kubeconfig", none)
		if code != 1 || !strings.Contains(errs, "may not get pods in namespace demo") {
			t.Errorf("no rights: exit %d: %s", code, errs)
		}
		some := ec.restricted(t, "podreader", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}})
		code, _, errs = runCLI("explain", "demo/web-1", "--kubeconfig", some, "--scheduler-namespace", "wasmsched-system")
		if code != 1 || !strings.Contains(errs, "may not get configmaps in namespace wasmsched-system") {
			t.Errorf("pods only: exit %d: %s", code, errs)
		}
		more := ec.restricted(t, "podcmreader", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "configmaps"}, Verbs: []string{"get"}}})
		code, _, errs = runCLI("explain", "demo/web-1", "--kubeconfig", more, "--scheduler-namespace", "wasmsched-system")
		if code != 1 || !strings.Contains(errs, "may not list schedulingpolicies.wasmsched.io in namespace wasmsched-system") {
			t.Errorf("pods and configmaps: exit %d: %s", code, errs)
		}
		code, _, errs = runCLI("explain", "demo/space-1", "--kubeconfig", more, "--scheduler-namespace", "wasmsched-system")
		if code != 1 || !strings.Contains(errs, "may not list nodes at cluster scope") {
			t.Errorf("static profile, pods and configmaps: exit %d: %s", code, errs)
		}
		// All but the kind the quota policy reads.
		most := ec.restricted(t, "noquotas", []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods", "configmaps", "nodes"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"wasmsched.io"}, Resources: []string{"schedulingpolicies"}, Verbs: []string{"get", "list"}}})
		code, _, errs = runCLI("explain", "team-a/qa-2", "--kubeconfig", most, "--scheduler-namespace", "wasmsched-system")
		if code != 1 || !strings.Contains(errs, "may not list elasticquotas.scheduling.x-k8s.io at cluster scope: it needs the right to list elasticquotas.scheduling.x-k8s.io") {
			t.Errorf("no right to the quota policy's objects: exit %d: %s", code, errs)
		}
	})
	t.Run("readme", func(t *testing.T) { checkREADMEExplain(t, ec) })
	t.Run("ui", func(t *testing.T) { testUI(t, ec) })
	t.Run("ui many nodes", func(t *testing.T) { testUIManyNodes(t, ec) })
}

// checkREADMEExplain holds the README's explain example to what the
// command prints on the demo (digests and timings aside); with
// WASMSCHED_UPDATE_DOCS=1 it rewrites the example instead.
func checkREADMEExplain(t *testing.T, ec *explainCluster) {
	path := filepath.Join(testwasm.Root(t), "README.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	const open, end = "<!-- explain -->\n```\n", "```\n<!-- /explain -->"
	i, j := strings.Index(readme, open), strings.Index(readme, end)
	if i < 0 || j < i {
		t.Fatal("README.md has no <!-- explain --> block")
	}
	block := readme[i+len(open) : j]
	cmdLine, shown, _ := strings.Cut(block, "\n")
	args := strings.Fields(strings.TrimPrefix(cmdLine, "$ bin/wasmsched "))
	if len(args) < 2 || args[0] != "explain" || args[1] != "--kubeconfig" {
		t.Fatalf("README explain block starts %q", cmdLine)
	}
	code, out, errs := ec.explainCLI(args[3:]...)
	if code != 0 {
		t.Fatalf("%s: exit %d: %s", cmdLine, code, errs)
	}
	if os.Getenv("WASMSCHED_UPDATE_DOCS") == "1" {
		readme = readme[:i+len(open)] + cmdLine + "\n" + out + readme[j:]
		if err := os.WriteFile(path, []byte(readme), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	norm := regexp.MustCompile(`\b[0-9a-f]{12,16}\b|evaluated in [0-9.]+[µm]?s`)
	if got, want := norm.ReplaceAllString(out, "#"), norm.ReplaceAllString(shown, "#"); got != want {
		t.Errorf("README.md's explain output is not what %s prints (WASMSCHED_UPDATE_DOCS=1 rewrites it):\n%s\nwant\n%s", cmdLine, out, shown)
	}
}

// testExplainStatic explains a pod of the static profile: nodepin from a
// file, edge from ConfigMaps, zone from a URL, and a policy whose file
// does not exist; then a what-if of a static policy's settings, and an
// upload the scheduler refuses, which leaves the serving module only in
// the scheduler's module cache.
func testExplainStatic(t *testing.T, ec *explainCluster) {
	code, out, errs := ec.explainCLI("demo/space-1", "--limit", "0")
	t.Logf("%s", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"profile static (static policies, as replica ", "nodepin ", "(weight 2, failurePolicy Fail, file ",
		"edge ", "(weight 1, failurePolicy Ignore, configMap edge)", "zone ", ", url http://127.0.0.1:", "gang ", ", oci oci://127.0.0.1:",
		"not evaluated: missing: no revision serves", "/nonexistent/missing.wasm",
		"now: bound to c-cpu-2", "policies would choose: c-cpu-2 (where it is)",
		"edge: not an edge node: space workloads (annotation type=space) need label kubernetes.io/role=edge",
		"nodepin: node is not one of the allowed nodes"} {
		if !strings.Contains(out, want) {
			t.Errorf("static: output lacks %q", want)
		}
	}
	code, out, errs = ec.explainCLI("demo/space-1", "-o", "json")
	if code != 0 {
		t.Fatalf("-o json: exit %d: %s", code, errs)
	}
	var res explain.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Static || len(res.Policies) != 4 || res.Policies[1].Source != "configMap edge" || res.Chosen != "c-cpu-2" {
		t.Errorf("-o json: static %v, policies %+v, chosen %q", res.Static, res.Policies, res.Chosen)
	}

	// What if nodepin allowed a-cpu-1 only: the space workload fits nowhere.
	code, out, errs = ec.explainCLI("demo/space-1", "--settings", `nodepin={"nodes":["a-cpu-1"]}`)
	t.Logf("%s", out)
	if code != 0 {
		t.Fatalf("what-if: exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "what-if: serving revisions choose c-cpu-2; with the what-if unschedulable: ") {
		t.Errorf("static what-if: output lacks the pod's move")
	}

	// An upload the scheduler refuses replaces edge's ConfigMaps: they no
	// longer hold the module serving. With no module cache on this
	// machine, explain says where it looked and what to do; with the
	// module in the cache (where the scheduler keeps last good modules),
	// it runs.
	ctx := context.Background()
	edge, err := os.ReadFile(testwasm.Path(t, "examples/edge"))
	if err != nil {
		t.Fatal(err)
	}
	put := func(module []byte) {
		cms, err := source.Pack("edge", "wasmsched-system", module)
		if err != nil {
			t.Fatal(err)
		}
		for _, cm := range cms {
			if _, err := ec.client.CoreV1().ConfigMaps("wasmsched-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	put([]byte("\x00asm but not a module"))
	defer put(edge)
	home := t.TempDir()
	t.Setenv("WASMSCHED_CACHE_DIR", filepath.Join(home, "cache"))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, "xdg"))
	code, _, errs = ec.explainCLI("demo/space-1")
	if code != 1 || !strings.Contains(errs, "policy edge, revision "+source.Digest(edge)[:12]) ||
		!strings.Contains(errs, "configMap edge now holds module "+source.Digest([]byte("\x00asm but not a module"))[:12]+", not the one serving") ||
		!strings.Contains(errs, "give it with --policy edge=FILE.wasm") {
		t.Errorf("refused upload, no cache: exit %d: %s", code, errs)
	}
	cache, err := source.OpenCache(filepath.Join(home, "cache", "modules"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.Put(edge); err != nil {
		t.Fatal(err)
	}
	code, out, errs = ec.explainCLI("demo/space-1")
	if code != 0 || !strings.Contains(out, "policies would choose: c-cpu-2 (where it is)") {
		t.Errorf("refused upload, module cached: exit %d: %s%s", code, out, errs)
	}
}
