package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"sigs.k8s.io/yaml"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/lifecycle"
	"github.com/wasmsched/wasmsched/host/plugin"
	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/crds"
	"github.com/wasmsched/wasmsched/internal/demo"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// hostileReason is what the hostile profile's probe rejects every pod
// with: markup that would run script if the page inserted it as HTML.
const hostileReason = `<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>`

// explainCluster is the demo (its policies, nodes and pods, placed by a
// scheduler running in-process) plus two more profiles: "failing", whose
// probes trap, loop or exhaust memory for pods labelled fail=..., with a
// policy whose module does not exist (nothing serves it); and "hostile",
// whose probe rejects every pod with hostileReason.
type explainCluster struct {
	cp         *controlplane.ControlPlane
	client     kubernetes.Interface
	kubeconfig string
}

func startExplainCluster(t *testing.T) *explainCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane and a scheduler")
	}
	controlplane.QuietLogs()
	ctx := context.Background()
	cp, err := controlplane.Start(ctx, controlplane.Options{TB: t, Authorization: "RBAC"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	policies := filepath.Join(dir, "policies")
	if err := os.Mkdir(policies, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range demo.Policies {
		if err := os.Symlink(testwasm.Path(t, "examples/"+p.Name), filepath.Join(policies, p.Name+".wasm")); err != nil {
			t.Fatal(err)
		}
	}
	if err := demo.Install(ctx, cp.RestConfig(), policies); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cp.RestConfig())
	client := cp.Client()
	probe, err := os.ReadFile(testwasm.Path(t, "test/guests/probe"))
	if err != nil {
		t.Fatal(err)
	}
	cms, err := source.PackModule(demo.PolicyNamespace, probe)
	if err != nil {
		t.Fatal(err)
	}
	// The quota profile: scheduler-plugins' ElasticQuota CRD, one quota
	// of one core for tenant team-a, and the quota example reading it.
	if err := crds.Install(ctx, cp.RestConfig(), crds.ElasticQuota()); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eq := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
		"metadata": map[string]any{"name": "quota", "namespace": "team-a"},
		"spec":     map[string]any{"min": map[string]any{"cpu": "1"}, "max": map[string]any{"cpu": "1"}}}}
	eqGVR := schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "elasticquotas"}
	if _, err := dyn.Resource(eqGVR).Namespace("team-a").Create(ctx, eq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	quota, err := os.ReadFile(testwasm.Path(t, "examples/quota"))
	if err != nil {
		t.Fatal(err)
	}
	qcms, err := source.PackModule(demo.PolicyNamespace, quota)
	if err != nil {
		t.Fatal(err)
	}
	cms = append(cms, qcms...)
	timeout := &metav1.Duration{Duration: 500 * time.Millisecond}
	memory := resource.MustParse("64Mi")
	for _, cm := range cms {
		if _, err := client.CoreV1().ConfigMaps(demo.PolicyNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	extra := []struct {
		name, profile, settings, digest string
	}{
		{"quota", "quota", `{}`, source.Digest(quota)},
		{"trap", "failing", `{"at": "filter", "how": "panic", "when": "fail=trap"}`, ""},
		{"loop", "failing", `{"at": "filter", "how": "loop", "when": "fail=loop"}`, ""},
		{"oom", "failing", `{"at": "filter", "how": "grow", "when": "fail=oom"}`, ""},
		{"broken", "failing", `{}`, strings.Repeat("ab", 32)},
		{"hostile", "hostile", fmt.Sprintf(`{"preFilterReject": %q}`, hostileReason), ""},
	}
	for i, e := range extra {
		digest := e.digest
		if digest == "" {
			digest = source.Digest(probe)
		}
		var readCtx []string
		if e.name == "quota" {
			readCtx = []string{"scheduling.x-k8s.io/v1alpha1/elasticquotas"}
		}
		sp := &api.SchedulingPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: e.name, Namespace: demo.PolicyNamespace, Labels: map[string]string{demo.ProfileLabel: e.profile}},
			Spec: api.SchedulingPolicySpec{Module: api.Module{SHA256: digest}, Settings: json.RawMessage(e.settings),
				Order: int32(i), FailurePolicy: api.FailurePolicyFail, Timeout: timeout, MemoryLimit: &memory, Context: readCtx},
		}
		u, err := api.ToUnstructured(sp)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(api.GVR).Namespace(demo.PolicyNamespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	static := staticPolicies(t, ctx, client)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, explainSchedulerConfig(t, kubeconfig, static), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := controlplane.StartScheduler(ctx, controlplane.SchedulerOptions{Kubeconfig: kubeconfig, ConfigFile: cfgPath,
		RegistryOptions: []app.Option{app.WithPlugin(plugin.Name, plugin.New)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	// Every policy reports its profile (the broken one too, serving
	// nothing) before any pod is created, so that each pod meets them all.
	waitReported(t, dyn, 3+len(extra))
	pods, err := demo.Create(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	mkIn := func(ns, name, scheduler string, labels map[string]string, cpu string) {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: v1.PodSpec{SchedulerName: scheduler, Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}}}
		if cpu != "" {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(name, scheduler string, labels map[string]string) {
		mkIn(demo.Namespace, name, scheduler, labels, "")
	}
	// team-a's first pod takes its one core; the second would exceed it.
	mkIn("team-a", "qa-1", "quota", nil, "1")
	for {
		p, err := client.CoreV1().Pods("team-a").Get(ctx, "qa-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	mkIn("team-a", "qa-2", "quota", nil, "1")
	for _, f := range []string{"trap", "loop", "oom"} {
		mk(f+"-pod", "failing", map[string]string{"fail": f})
	}
	mk("hostile-pod", "hostile", nil)
	mk("elsewhere", "no-such-scheduler", nil)
	rows, err := demo.Settle(ctx, client, pods, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !demo.AllExpected(rows) {
		var b strings.Builder
		demo.PrintTable(&b, rows)
		t.Fatalf("demo pods did not settle as expected:\n%s", b.String())
	}
	// The static profile: c-cpu-2 becomes an edge node, and a space
	// workload goes there (nodepin allows a-cpu-1 and c-cpu-2, edge only
	// edge nodes).
	node, err := client.CoreV1().Nodes().Get(ctx, "c-cpu-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Labels["kubernetes.io/role"] = "edge"
	if _, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStaticServing(t, client, "nodepin", "edge", "zone", "gang")
	space := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "space-1", Namespace: demo.Namespace, Annotations: map[string]string{"type": "space"}},
		Spec: v1.PodSpec{SchedulerName: "static", Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}}}
	if _, err := client.CoreV1().Pods(demo.Namespace).Create(ctx, space, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		p, err := client.CoreV1().Pods(demo.Namespace).Get(ctx, "space-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return &explainCluster{cp: cp, client: client, kubeconfig: kubeconfig}
}

// staticPolicies are the static profile's policies, one per kind of
// source: nodepin from a file, edge from ConfigMaps (written here), zone
// from a URL (served here on loopback), gang from an OCI registry (here,
// on loopback), and "missing", whose file does not exist (nothing serves
// it; failurePolicy Ignore leaves it out).
func staticPolicies(t *testing.T, ctx context.Context, client kubernetes.Interface) []any {
	t.Helper()
	edge, err := os.ReadFile(testwasm.Path(t, "examples/edge"))
	if err != nil {
		t.Fatal(err)
	}
	cms, err := source.Pack("edge", demo.PolicyNamespace, edge)
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms {
		if _, err := client.CoreV1().ConfigMaps(demo.PolicyNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	zone, err := os.ReadFile(testwasm.Path(t, "examples/zone"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(zone) }))
	t.Cleanup(srv.Close)
	// gang from an OCI registry on loopback (plain HTTP).
	gang, err := os.ReadFile(testwasm.Path(t, "examples/gang"))
	if err != nil {
		t.Fatal(err)
	}
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	ref, err := source.PushOCI(ctx, strings.TrimPrefix(reg.URL, "http://")+"/policies/gang:v1", gang, nil, source.OCIOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return []any{
		map[string]any{"name": "nodepin", "source": map[string]any{"file": testwasm.Path(t, "examples/nodepin")}, "weight": 2,
			"settings": map[string]any{"nodes": []any{"a-cpu-1", "c-cpu-2"}}},
		map[string]any{"name": "edge", "source": map[string]any{"configMap": "edge"}, "failurePolicy": "Ignore"},
		map[string]any{"name": "zone", "source": map[string]any{"url": srv.URL + "/zone.wasm", "sha256": source.Digest(zone)},
			"settings": map[string]any{"groupLabel": "app", "maxSkew": 1}},
		map[string]any{"name": "gang", "source": map[string]any{"oci": "oci://" + ref.String(), "sha256": source.Digest(gang)},
			"settings": map[string]any{"timeoutSeconds": 10}},
		map[string]any{"name": "missing", "source": map[string]any{"file": "/nonexistent/missing.wasm"}, "failurePolicy": "Ignore"},
	}
}

// waitStaticServing waits until the static profile's state records a
// revision serving each policy named.
func waitStaticServing(t *testing.T, client kubernetes.Interface, names ...string) {
	t.Helper()
	for {
		cm, err := client.CoreV1().ConfigMaps(demo.PolicyNamespace).Get(context.Background(), lifecycle.StateConfigMap, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		serving := 0
		for _, n := range names {
			var st api.SchedulingPolicyStatus
			if cm != nil && json.Unmarshal([]byte(cm.Data[lifecycle.StateKey("static", n)]), &st) == nil && st.Serving != nil {
				serving++
			}
		}
		if serving == len(names) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// explainSchedulerConfig is the demo's scheduler configuration with the
// failing, hostile and quota profiles (SchedulingPolicies) and the static
// profile (static, its `policies:` arguments) added.
func explainSchedulerConfig(t *testing.T, kubeconfig string, static []any) []byte {
	raw, err := demo.SchedulerConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	base := cfg["profiles"].([]any)[0].(map[string]any)
	for _, name := range []string{"failing", "hostile", "quota"} {
		b, _ := json.Marshal(base)
		var p map[string]any
		json.Unmarshal(b, &p)
		p["schedulerName"] = name
		args := p["pluginConfig"].([]any)[0].(map[string]any)["args"].(map[string]any)
		args["schedulingPolicies"] = map[string]any{"selector": map[string]any{"matchLabels": map[string]any{demo.ProfileLabel: name}}}
		cfg["profiles"] = append(cfg["profiles"].([]any), p)
	}
	b, _ := json.Marshal(base)
	var p map[string]any
	json.Unmarshal(b, &p)
	p["schedulerName"] = "static"
	args := p["pluginConfig"].([]any)[0].(map[string]any)["args"].(map[string]any)
	delete(args, "schedulingPolicies")
	args["policies"] = static
	cfg["profiles"] = append(cfg["profiles"].([]any), p)
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitReported waits until n SchedulingPolicies list a replica, each
// serving or refused.
func waitReported(t *testing.T, dyn dynamic.Interface, n int) {
	t.Helper()
	for {
		l, err := dyn.Resource(api.GVR).Namespace(demo.PolicyNamespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for i := range l.Items {
			sp, err := api.FromUnstructured(&l.Items[i])
			if err != nil {
				t.Fatal(err)
			}
			if len(sp.Status.Replicas) > 0 && (sp.Status.Serving != nil || sp.Name == "broken") {
				done++
			}
		}
		if done == n {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// restricted writes a kubeconfig acting as a user who may only get pods
// (and, with more, list nodes too) in the demo namespace.
func (ec *explainCluster) restricted(t *testing.T, user string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	rb := ec.client.RbacV1()
	if _, err := rb.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rb.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The authorizer learns of the role from its informer: wait until it
	// grants the first rule.
	for len(rules) > 0 {
		sar, err := ec.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "demo", Verb: rules[0].Verbs[0], Group: rules[0].APIGroups[0], Resource: rules[0].Resources[0]}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cfg := rest.CopyConfig(ec.cp.RestConfig())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	path := filepath.Join(t.TempDir(), user+".kubeconfig")
	if err := controlplane.WriteKubeconfigFile(path, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}

// explainCLI runs wasmsched explain against the cluster.
func (ec *explainCluster) explainCLI(args ...string) (int, string, string) {
	return runCLI(append(append([]string{"explain"}, args...), "--kubeconfig", ec.kubeconfig, "--scheduler-namespace", demo.PolicyNamespace)...)
}
