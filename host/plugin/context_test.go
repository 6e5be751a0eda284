//go:build !nocontrolplane

// Left out with -tags nocontrolplane: make test runs this package under the
// race detector without the tests that start a control plane, which would
// link the API server, compiled with -race on 2 cores at a cold cache, for
// them alone; they run without -race (Makefile, CP_PKGS).

package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/clusterctx"
	"github.com/wasmsched/wasmsched/host/lifecycle"
	"github.com/wasmsched/wasmsched/host/policy"
	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// elasticQuotas is scheduler-plugins' ElasticQuota, a CRD the test's API
// server does not have.
const elasticQuotas = "scheduling.x-k8s.io/v1alpha1/elasticquotas"

// probeArgs are the arguments of a probe policy declaring it reads kinds
// (and namespace usage when usage is set), with allow as its allow-list.
func probeArgs(t *testing.T, name string, kinds []string, usage bool, allow ...string) lifecycle.PolicyArgs {
	t.Helper()
	settings := `{"context": [` + quoteAll(kinds) + `], "namespaceUsage": ` + map[bool]string{true: "true", false: "false"}[usage] + `}`
	a, err := decode(t, `{"policies": [{"name": "`+name+`", "source": {"configMap": "`+name+`"}, "settings": `+settings+`}]}`)
	if err != nil {
		t.Fatal(err)
	}
	pa := a.Policies[0]
	pa.Context = allow // unvalidated: as an older CRD without its rules would let through
	return pa
}

// loadBound loads module with pa's settings and binds it through cc, as
// the lifecycle does before a version serves.
func loadBound(ctx context.Context, cc *clusterContext, pa lifecycle.PolicyArgs, module []byte) (*policy.Policy, error) {
	p, err := policy.Load(ctx, policy.Options{Name: pa.Name, Wasm: module, Settings: pa.Settings, Engine: pa.EngineConfig()})
	if err != nil {
		return nil, err
	}
	if err := cc.bind(ctx, &pa, p, nil); err != nil {
		_ = p.Close(ctx)
		return nil, err
	}
	return p, nil
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = `"` + s + `"`
	}
	return strings.Join(q, ", ")
}

// testContext is a scheduler's cluster context on cp: its typed informer
// factory and a dynamic client for custom resources.
func testContext(t *testing.T, cp *controlplane.ControlPlane) *clusterContext {
	t.Helper()
	f := informers.NewSharedInformerFactory(cp.Client(), 0)
	cc := &clusterContext{reg: clusterctx.NewRegistry(f, dynamic.NewForConfigOrDie(cp.RestConfig())), refs: 1}
	t.Cleanup(cc.release)
	return cc
}

// A version is checked against its policy's allow-list when it loads: a
// kind it reads and the configuration does not allow refuses it, naming
// the policy, the kind and the remedy; Secrets are refused even when
// listed; an allowed kind the API server does not serve (CRD not
// installed) refuses it naming the kind and the cause; allowed kinds that
// sync load, bound to their stores, and usage starts being counted.
func TestContextAllowList(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	controlplane.QuietLogs()
	ctx := context.Background()
	cp, err := controlplane.Start(ctx, controlplane.Options{TB: t})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Install(ctx, dynamic.NewForConfigOrDie(cp.RestConfig())); err != nil {
		t.Fatal(err)
	}
	probe := testwasm.Bytes(t, "test/guests/probe")
	load := func(cc *clusterContext, pa lifecycle.PolicyArgs) error {
		t.Helper()
		p, err := loadBound(ctx, cc, pa, probe)
		if p != nil {
			_ = p.Close(ctx)
		}
		return err
	}

	t.Run("not allowed", func(t *testing.T) {
		cc := testContext(t, cp)
		err := load(cc, probeArgs(t, "quota", []string{"v1/namespaces", elasticQuotas}, false, "v1/namespaces"))
		want := "policy quota reads " + elasticQuotas + ", which its configuration does not allow (add it to context)"
		if err == nil || err.Error() != want {
			t.Fatalf("load: %v, want %q", err, want)
		}
		// Nothing was started for a refused version.
		if cc.usage.Load() != nil {
			t.Error("usage counted for a refused version")
		}
	})
	t.Run("nothing allowed", func(t *testing.T) {
		err := load(nil, probeArgs(t, "reader", []string{"v1/namespaces"}, false))
		if err == nil || !strings.Contains(err.Error(), "policy reader reads v1/namespaces, which its configuration does not allow (add it to context)") {
			t.Fatalf("load: %v", err)
		}
	})
	t.Run("secrets", func(t *testing.T) {
		// Listed by an operator (arguments made without validation, as an
		// older CRD without the rule would let through): still refused.
		err := load(testContext(t, cp), probeArgs(t, "thief", []string{"v1/secrets"}, false, "v1/secrets"))
		if err == nil || !strings.Contains(err.Error(), "policy thief reads v1/secrets: secrets are never readable by policies") {
			t.Fatalf("load: %v", err)
		}
	})
	t.Run("CRD not installed", func(t *testing.T) {
		start := time.Now()
		err := load(testContext(t, cp), probeArgs(t, "quota", []string{elasticQuotas}, false, elasticQuotas))
		if err == nil || !strings.Contains(err.Error(), "policy quota cannot read "+elasticQuotas) || !strings.Contains(err.Error(), "CustomResourceDefinition") {
			t.Fatalf("load: %v, want the kind and its missing CRD named", err)
		}
		if d := time.Since(start); d > contextSyncTimeout/2 {
			t.Errorf("refused after %v: the missing CRD should be seen at the first list, not at the sync deadline", d)
		}
		t.Logf("refused in %v: %v", time.Since(start).Round(time.Millisecond), err)
	})
	t.Run("allowed", func(t *testing.T) {
		cc := testContext(t, cp)
		kinds := []string{"v1/namespaces", "wasmsched.io/v1alpha1/schedulingpolicies"}
		pa := probeArgs(t, "reader", kinds, true, "scheduling.k8s.io/v1/priorityclasses", kinds[1], kinds[0])
		p, err := loadBound(ctx, cc, pa, probe)
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		defer p.Close(ctx)
		if got := p.ContextKinds(); len(got) != 2 || got[0].String() != kinds[0] || got[1].String() != kinds[1] {
			t.Errorf("context kinds %v, want %v", got, kinds)
		}
		if cc.usage.Load() == nil {
			t.Error("a version reading namespace usage loaded, and usage is not counted")
		}
	})
}

// A version refused for what it reads is refused like any other: the
// version serving keeps serving, and the status says why.
func TestContextRefusalKeepsServing(t *testing.T) {
	a, probe := testwasm.Bytes(t, "test/guests/versions/a"), testwasm.Bytes(t, "test/guests/probe")
	var cc *clusterContext // no informers: nothing to bind to, and a needs none
	lc, src := startStatic(t, `{"name": "quota", "source": {"file": "unused"}, "settings": {"context": ["`+elasticQuotas+`"]}, "context": ["v1/namespaces"]}`, cc.bind, a)
	s := lc.Roster().Slot("quota")
	if s.Current() == nil || s.Current().Digest() != source.Digest(a) {
		t.Fatalf("serving %v after start-up, want a", s.Current())
	}
	src.deliver(probe)
	waitFor(t, "the probe refused", func() bool { return s.Status().LastRejected != nil })
	if d := s.Current().Digest(); d != source.Digest(a) {
		t.Fatalf("serving %s, want a", api.ShortDigest(d))
	}
	want := "policy quota reads " + elasticQuotas + ", which its configuration does not allow (add it to context)"
	if r := s.Status().LastRejected; r.Digest != source.Digest(probe) || r.Error != want {
		t.Fatalf("lastRejected %+v, want the probe refused with %q", *r, want)
	}
}

// Reserve counts the pod in the tenant usage as if bound, Unreserve takes
// it out again, for every pod of the profile whatever its policies export
// (here none: the cycle state is empty); before any policy reads usage,
// nothing is counted.
func TestReserveCountsUsage(t *testing.T) {
	ctx := context.Background()
	pl := &Plugin{cluster: &clusterContext{}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team-a", UID: "uid-p"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")}}}}}}
	pl.Reserve(ctx, framework.NewCycleState(), pod, "n1")
	pl.Unreserve(ctx, framework.NewCycleState(), pod, "n1")

	u := clusterctx.NewUsage()
	pl.cluster.usage.Store(u)
	pl.Reserve(ctx, framework.NewCycleState(), pod, "n1")
	if got := u.Get("", "team-a"); got.GetMilliCpu() != 1500 || got.GetPods() != 1 {
		t.Fatalf("after Reserve, team-a uses %v, want 1500m cpu in 1 pod", got)
	}
	pl.Unreserve(ctx, framework.NewCycleState(), pod, "n1")
	if got := u.Get("", "team-a"); got != nil {
		t.Fatalf("after Unreserve, team-a uses %v, want nothing", got)
	}
}

// In a real scheduler (the framework's handle, its informer factory before
// the scheduler starts it): a static policy reading a kind it is not
// allowed cannot serve, and the profile's pods are refused with the
// refusal while the scheduler runs; allowed, it loads from the scheduler's
// informers, pods bind, the tenant usage counts them, and the policy reads
// Namespaces: a pod in a namespace with a label it refuses is refused with
// its reason.
func TestContextInScheduler(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and a scheduler")
	}
	ctx := context.Background()
	cp := startCluster(t)
	probe := testwasm.Path(t, "test/guests/probe")
	start := func(allow ...string) (*controlplane.Scheduler, error) {
		t.Helper()
		return cp.startScheduler(t, map[string]any{"namespace": "default", "policies": []any{map[string]any{
			"name": "reader", "source": map[string]any{"file": probe}, "context": allow,
			"settings": map[string]any{"context": []string{"v1/namespaces"}, "namespaceUsage": true, "rejectNamespaceLabel": "wasmsched-test/closed"},
		}}}, 0)
	}
	c := cp.Client()
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourcePods: resource.MustParse("110")}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Allocatable: alloc, Capacity: alloc}}
	if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	s, err := start("scheduling.k8s.io/v1/priorityclasses")
	if err != nil {
		t.Fatalf("start-up: %v (a policy that cannot serve must not stop the scheduler)", err)
	}
	early := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "early", Namespace: "default"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "pause"}}}}
	if _, err := c.CoreV1().Pods("default").Create(ctx, early, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	refusal := waitFailed(t, c, "default", "early")
	if !strings.Contains(refusal, "policy reader cannot serve") || !strings.Contains(refusal, "policy reader reads v1/namespaces, which its configuration does not allow (add it to context)") {
		t.Fatalf("FailedScheduling: %q, want the policy and its refusal named", refusal)
	}
	s.Stop()
	if err := c.CoreV1().Pods("default").Delete(ctx, "early", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	if _, err := start("v1/namespaces"); err != nil {
		t.Fatalf("start-up: %v", err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "pause",
		Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")}}}}}}
	if _, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	usage := func() *clusterctx.Usage {
		contexts.Lock()
		defer contexts.Unlock()
		for _, cc := range contexts.m {
			return cc.usage.Load()
		}
		return nil
	}
	// Usage counts the pod from Reserve on, before its binding is written.
	waitFor(t, "the pod counted in namespace default's usage", func() bool {
		u := usage()
		return u != nil && u.Get("", "default").GetMilliCpu() == 250 && u.Get("", "default").GetPods() == 1
	})
	waitFor(t, "the pod bound to n1", func() bool {
		p, err := c.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == "n1"
	})

	// The policy reads Namespaces: a pod in a namespace labelled closed is
	// refused with the policy's reason, naming the label it read.
	closed := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "closed", Labels: map[string]string{"wasmsched-test/closed": "yes"}}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, closed, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod = pod.DeepCopy()
	pod.Namespace = "closed"
	if _, err := c.CoreV1().Pods("closed").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	msg := waitFailed(t, c, "closed", "p")
	if !strings.Contains(msg, "probe: namespace closed has label wasmsched-test/closed=yes") {
		t.Fatalf("FailedScheduling: %q, want the policy's reason naming the namespace's label", msg)
	}

	// The label goes: the change of the Namespace requeues the pod, which
	// binds long before the scheduler's periodic flush (5 minutes) would
	// have retried it.
	ns, err := c.CoreV1().Namespaces().Get(ctx, "closed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(ns.Labels, "wasmsched-test/closed")
	if _, err := c.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pod in the reopened namespace bound", func() bool {
		p, err := c.CoreV1().Pods("closed").Get(ctx, "p", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == "n1"
	})
}
