package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/plugin"
	"github.com/wasmsched/wasmsched/internal/crds"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// Context-aware policies on the real control plane, one cluster for all:
// the quota example reading ElasticQuotas and the scheduler's tenant usage
// (its rules, a burst, live quota changes, preemption across and within
// tenants), a probe reading DRA objects, a revision reading a kind its
// SchedulingPolicy does not allow, and every pod bound at most once.

// Kinds of cluster object the policies here read, as an allow-list names
// them.
const (
	elasticQuotas  = "scheduling.x-k8s.io/v1alpha1/elasticquotas"
	resourceSlices = "resource.k8s.io/v1/resourceslices"
	deviceClasses  = "resource.k8s.io/v1/deviceclasses"
)

var elasticQuotaGVR = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "elasticquotas"}

// draScheduler is the profile whose pods the DRA probe schedules; the
// default profile runs the quota policy.
const draScheduler = "dra-scheduler"

// gpuDriver is the DRA driver of the test's ResourceSlices, and the name of
// its DeviceClass.
const gpuDriver = "gpu.example.com"

// contextProfiles is a tweak giving the scheduler two profiles, each
// running one SchedulingPolicy: quota in the default profile, slices in
// draScheduler.
func contextProfiles(cfg map[string]any) {
	profile := func(scheduler, policy string) map[string]any {
		return map[string]any{
			"schedulerName": scheduler,
			"plugins":       map[string]any{"multiPoint": map[string]any{"enabled": []any{map[string]any{"name": plugin.Name, "weight": 50}}}},
			"pluginConfig": []any{map[string]any{"name": plugin.Name, "args": map[string]any{
				"namespace":          policyNamespace,
				"schedulingPolicies": map[string]any{"names": []any{policy}},
				"probation":          "1s",
			}}},
		}
	}
	cfg["profiles"] = []any{profile("default-scheduler", "quota"), profile(draScheduler, "slices")}
}

// TestContext runs the quota example and a DRA-reading probe as
// SchedulingPolicies on one control plane with the ElasticQuota CRD
// installed. Its subtests share the cluster and run in order; each
// tenant's objects are removed when the subtests using them are done, so
// that tenants of one do not lend to or borrow from those of another.
func TestContext(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	began := time.Now()
	c := startCluster(t, nil)
	ctx := context.Background()
	if err := crds.Install(ctx, c.cp.RestConfig(), crds.ElasticQuota()); err != nil {
		t.Fatal(err)
	}
	c.installCRD()
	if _, err := c.client.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"q-a", "q-b", "q-burst", "p-a", "p-b", "p-c", "p-d", "dra"} {
		c.namespace(ns)
	}
	// Every quota pod names its pool: the rules on two large nodes, each
	// preemption scene on a node of 4 cores of its own.
	c.sizedNode("big-1", "8", "big")
	c.sizedNode("big-2", "8", "big")
	c.sizedNode("small-1", "4", "preempt-across")
	c.sizedNode("small-2", "4", "preempt-within")
	for _, n := range []string{"dra-1", "dra-2", "dra-3"} {
		c.sizedNode(n, "8", "dra")
	}

	quota := map[string]any{"module": map[string]any{"sha256": c.pushModule(testwasm.Bytes(t, "examples/quota"))}, "context": []any{elasticQuotas}}
	quotaKey := revisionKey(t, quota)
	c.applyPolicy("quota", quota)
	probe := map[string]any{
		"module": map[string]any{"sha256": c.pushModule(testwasm.Bytes(t, "test/guests/probe"))},
		"settings": map[string]any{"context": []any{resourceSlices, deviceClasses},
			"sliceDriver": gpuDriver, "deviceClass": gpuDriver},
		"context": []any{deviceClasses, resourceSlices},
	}
	c.applyPolicy("slices", probe)
	restartScheduler(t, c, nil, contextProfiles)
	c.waitPolicy("quota", "serving", 60*time.Second, servingKey(quotaKey, metav1.ConditionTrue))
	c.waitPolicy("slices", "serving", 60*time.Second, servingKey(revisionKey(t, probe), metav1.ConditionTrue))
	t.Logf("set-up (control plane, CRDs, scheduler, both policies serving): %v", time.Since(began).Round(time.Millisecond))

	// Each subtest gets the cluster with its own *testing.T, so that its
	// helpers fail the subtest.
	step := func(name string, f func(t *testing.T, c *cluster)) {
		start := time.Now()
		t.Run(name, func(t *testing.T) {
			sub := *c
			sub.t = t
			f(t, &sub)
		})
		t.Logf("%s: %v", name, time.Since(start).Round(time.Millisecond))
	}
	step("QuotaRules", quotaRules)
	c.clearTenants("q-a", "q-b")
	step("QuotaBurst", quotaBurst)
	step("QuotaLiveChange", quotaLiveChange)
	step("DisallowedKind", func(t *testing.T, c *cluster) { disallowedKind(t, c, quota, quotaKey) })
	c.clearTenants("q-burst")
	step("DRAObjects", draObjects)
	step("PreemptAcrossTenants", preemptAcrossTenants)
	step("PreemptWithinTenant", preemptWithinTenant)
	step("BoundOnce", boundAtMostOnce)
	t.Logf("whole test: %v", time.Since(began).Round(time.Millisecond))
}

// quotaRules: a tenant's pods bind within its min; above it they borrow
// while the other tenants' unused min covers what the tenant would borrow
// in all, and are refused, naming tenant, resource, use and limit, once it
// does not; a lender's pod leaving lets the refused pod bind; over max is
// refused whatever others leave unused.
func quotaRules(t *testing.T, c *cluster) {
	c.elasticQuota("q-a", "2", "4")
	c.elasticQuota("q-b", "3", "4")
	c.quotaSeen("q-b")
	for _, p := range []string{"a-1", "a-2", "a-3"} { // a-3 borrows 1 of q-b's unused 3
		c.quotaPod("q-a", p, "big")
		c.waitBoundIn("q-a", p)
	}
	for _, p := range []string{"b-1", "b-2"} { // within q-b's min: q-b leaves 1 unused
		c.quotaPod("q-b", p, "big")
		c.waitBoundIn("q-b", p)
	}
	c.quotaPod("q-a", "a-4", "big")
	c.waitFailedIn("q-a", "a-4", "quota: tenant q-a cannot borrow cpu: uses 3, pod requests 1, min 2, other tenants' unused min 1")
	c.deletePod("q-b", "b-2")
	c.waitBoundIn("q-a", "a-4") // q-b leaves 2 unused: q-a borrows 2
	c.quotaPod("q-a", "a-5", "big")
	c.waitFailedIn("q-a", "a-5", "quota: tenant q-a would exceed its max of cpu: uses 4, pod requests 1, max 4")
	c.stayUnboundIn("q-a", "a-5", 500*time.Millisecond)
}

// quotaBurst: pods created at once never take a tenant over its max: the
// scheduler counts the pods it assumed and has not bound yet.
func quotaBurst(t *testing.T, c *cluster) {
	c.elasticQuota("q-burst", "3", "3")
	c.quotaSeen("q-burst")
	const n = 8
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = quotaPodSpec("q-burst", fmt.Sprintf("burst-%d", i), "big")
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	bound := c.waitSettled("q-burst", n, "would exceed its max")
	if len(bound) != 3 {
		t.Fatalf("%d burst pods bound (%v), want 3: the tenant's max", len(bound), bound)
	}
	for i := range n {
		name := fmt.Sprintf("burst-%d", i)
		if bound[name] != "" {
			continue
		}
		if msg := c.failedMessage("q-burst", name); !strings.Contains(msg, "quota: tenant q-burst would exceed its max of cpu: uses 3, pod requests 1, max 3") {
			t.Errorf("%s: FailedScheduling %q, want the max of 3 with 3 used (assumed pods counted)", name, msg)
		}
	}
}

// quotaLiveChange: raising an ElasticQuota's max lets pending pods bind
// without a restart; lowering it refuses the next pod with the new max.
func quotaLiveChange(t *testing.T, c *cluster) {
	start := time.Now()
	c.elasticQuota("q-burst", "5", "5")
	if !c.waitBoundCount("q-burst", 5, 15*time.Second) {
		// Go on from the state the test wants, so that what follows
		// still tests what it should.
		t.Errorf("after raising max to 5, %d pods bound within %v, want 5: the ElasticQuota change did not requeue the pending pods", len(c.boundPods("q-burst")), time.Since(start).Round(time.Second))
		c.nudge()
		if !c.waitBoundCount("q-burst", 5, 15*time.Second) {
			t.Fatalf("%d pods bound after raising max to 5 and a node update: %v", len(c.boundPods("q-burst")), c.boundPods("q-burst"))
		}
	} else {
		t.Logf("max raised to pods bound: %v", time.Since(start).Round(time.Millisecond))
	}
	time.Sleep(500 * time.Millisecond)
	if bound := c.boundPods("q-burst"); len(bound) != 5 {
		t.Fatalf("%d pods bound after raising max to 5: %v", len(bound), bound)
	}
	c.elasticQuota("q-burst", "4", "4")
	c.quotaPod("q-burst", "after-lowering", "big")
	c.waitFailedIn("q-burst", "after-lowering", "quota: tenant q-burst would exceed its max of cpu: uses 5, pod requests 1, max 4")
}

// waitBoundCount waits for n pods of ns to be bound, for Patience times
// timeout (what a quiet machine needs) at most.
func (c *cluster) waitBoundCount(ns string, n int, timeout time.Duration) bool {
	err := testwasm.Poll(c.t, 100*time.Millisecond, timeout, func(context.Context) (bool, error) {
		return len(c.boundPods(ns)) >= n, nil
	})
	return err == nil
}

// nudge updates a node's annotation: an event that requeues the pods the
// policy rejected.
func (c *cluster) nudge() {
	c.t.Helper()
	ctx := context.Background()
	n, err := c.client.CoreV1().Nodes().Get(ctx, "big-1", metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations["e2e/nudge"] = time.Now().String()
	if _, err := c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// disallowedKind: a revision whose settings make the quota policy read
// Namespaces (tenantLabel), which the SchedulingPolicy's context does not
// allow, is refused with the reason in status and an Event; the serving
// revision stays, and pods keep following it.
func disallowedKind(t *testing.T, c *cluster, good map[string]any, goodKey string) {
	bad := map[string]any{"module": good["module"], "context": good["context"], "settings": map[string]any{"tenantLabel": "example.com/tenant"}}
	c.applyPolicy("quota", bad)
	sp := c.waitPolicy("quota", "refusing the revision", 30*time.Second, func(sp *api.SchedulingPolicy) bool {
		return condition(sp, api.ConditionRejected).Status == metav1.ConditionTrue && sp.Status.ObservedGeneration == sp.Generation
	})
	const want = "policy quota reads v1/namespaces, which its configuration does not allow (add it to context)"
	rej, ready := condition(sp, api.ConditionRejected), condition(sp, api.ConditionReady)
	if rej.Reason != api.ReasonLoadFailed || !strings.Contains(rej.Message, want) {
		t.Errorf("Rejected = %+v, want %s saying %q", rej, api.ReasonLoadFailed, want)
	}
	if ready.Status != metav1.ConditionFalse || ready.Reason != api.ReasonServingLastGood || sp.Status.Serving == nil || sp.Status.Serving.Key != goodKey {
		t.Errorf("Ready = %+v, serving %+v: want the previous revision %s serving", ready, sp.Status.Serving, goodKey)
	}
	waitFor(t, "a PolicyRejected Event with the refusal", 20*time.Second, func() bool {
		return strings.Contains(strings.Join(c.policyEvents("quota", "PolicyRejected"), "\n"), want)
	})
	// Under the refused settings a namespace without the label is under no
	// quota: q-burst's pod would bind. It is refused by the serving rules.
	c.quotaPod("q-burst", "after-refusal", "big")
	c.waitFailedIn("q-burst", "after-refusal", "quota: tenant q-burst would exceed its max of cpu: uses 5, pod requests 1, max 4")

	c.applyPolicy("quota", good)
	c.waitPolicy("quota", "serving the good revision again", 30*time.Second, func(sp *api.SchedulingPolicy) bool {
		return servingKey(goodKey, metav1.ConditionTrue)(sp) && sp.Status.ObservedGeneration == sp.Generation &&
			condition(sp, api.ConditionRejected).Status != metav1.ConditionTrue
	})
}

// draObjects: the probe sees DeviceClasses and ResourceSlices as they are
// created, changed and deleted. Each change is made while a pod waits for
// it, so that a cycle that ran before the scheduler's informers had it only
// refuses the pod, which the change then requeues: the pod binds where the
// change allows, once it is seen. Changes of one kind are seen in order: a
// pod that bound thanks to a change proves the earlier ones seen.
func draObjects(t *testing.T, c *cluster) {
	ctx := context.Background()
	c.draPod("x-1")
	c.waitFailedIn("dra", "x-1", "probe: no DeviceClass "+gpuDriver)
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: gpuDriver}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + gpuDriver + `"`}}}}}
	if _, err := c.client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.resourceSlice("dra-1", 0)
	c.resourceSlice("dra-2", 3)
	if n := c.waitBoundIn("dra", "x-1"); n != "dra-2" {
		t.Fatalf("x-1 on %s, want dra-2 (the only node whose slice lists devices)", n)
	}

	c.draPod("x-2", "dra-1")
	c.waitFailedIn("dra", "x-2", "probe: no ResourceSlice of driver "+gpuDriver+" lists devices for node dra-1")
	c.resourceSlice("dra-1", 4)
	c.waitBoundIn("dra", "x-2")
	// dra-1's 4 devices are seen: it outscores dra-2's 3.
	c.draPod("x-3")
	if n := c.waitBoundIn("dra", "x-3"); n != "dra-1" {
		t.Fatalf("x-3 on %s, want dra-1 (4 devices against dra-2's 3)", n)
	}

	for _, n := range []string{"dra-1", "dra-2"} {
		if err := c.client.ResourceV1().ResourceSlices().Delete(ctx, n+"-gpu", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.draPod("x-4", "dra-3")
	c.resourceSlice("dra-3", 1)
	c.waitBoundIn("dra", "x-4")
	// The deletions before dra-3's slice are seen: only dra-3 is left.
	c.draPod("x-5")
	if n := c.waitBoundIn("dra", "x-5"); n != "dra-3" {
		t.Fatalf("x-5 on %s, want dra-3 (the others' slices deleted)", n)
	}
}

// preemptAcrossTenants: tenant p-b borrows p-a's unused min and fills the
// node; p-a's pods, of the same priority and within p-a's min, evict p-b's
// (the quota policy's SelectVictims) and bind, one victim each, until p-b
// is back at its min; p-a's next pod would borrow what p-b no longer
// leaves unused, and is refused without evicting anything.
func preemptAcrossTenants(t *testing.T, c *cluster) {
	const pool = "preempt-across"
	c.elasticQuota("p-a", "2", "4")
	c.elasticQuota("p-b", "2", "4")
	c.quotaSeen("p-b")
	for i := 1; i <= 4; i++ { // b-3 and b-4 borrow p-a's unused min
		name := fmt.Sprintf("b-%d", i)
		c.quotaPod("p-b", name, pool)
		c.waitBoundIn("p-b", name)
	}
	for i, want := range []int{3, 2} {
		name := fmt.Sprintf("a-%d", i+1)
		c.quotaPod("p-a", name, pool)
		if n := c.waitBoundIn("p-a", name); n != "small-1" {
			t.Fatalf("%s on %s, want small-1", name, n)
		}
		if left := c.boundPods("p-b"); len(left) != want {
			t.Fatalf("after %s bound, p-b has %d pods (%v), want %d: one evicted per pod", name, len(left), left, want)
		}
	}
	c.quotaPod("p-a", "a-3", pool)
	c.waitFailedIn("p-a", "a-3", "quota: tenant p-a cannot borrow cpu: uses 2, pod requests 1, min 2, other tenants' unused min 0")
	time.Sleep(500 * time.Millisecond) // a preemption would have deleted its victims by now
	if left := c.boundPods("p-b"); len(left) != 2 {
		t.Fatalf("p-b has %d pods (%v) after p-a's borrowing pod was refused, want 2: never below its min", len(left), left)
	}
	c.deletePod("p-a", "a-3")
}

// preemptWithinTenant: a higher-priority pod of a tenant at its max evicts
// one lower-priority pod of its own tenant (the default preemption,
// simulating through the policy's RemovePod), not the lower-priority pod
// of another tenant beside it, and binds.
func preemptWithinTenant(t *testing.T, c *cluster) {
	const pool = "preempt-within"
	c.elasticQuota("p-c", "2", "2")
	c.elasticQuota("p-d", "1", "1")
	c.quotaSeen("p-d")
	for _, p := range []struct{ ns, name string }{{"p-c", "c-low-1"}, {"p-c", "c-low-2"}, {"p-d", "d-low"}} {
		c.quotaPod(p.ns, p.name, pool)
		c.waitBoundIn(p.ns, p.name)
	}
	before := c.boundPods("p-a")
	c.quotaPod("p-c", "c-high", pool, func(p *v1.Pod) { p.Spec.PriorityClassName = "high" })
	if n := c.waitBoundIn("p-c", "c-high"); n != "small-2" {
		t.Fatalf("c-high on %s, want small-2", n)
	}
	if msg := c.failedMessage("p-c", "c-high"); !strings.Contains(msg, "quota: tenant p-c would exceed its max of cpu: uses 2, pod requests 1, max 2") {
		t.Errorf("c-high's FailedScheduling %q, want the max named (it bound only by preemption)", msg)
	}
	left := c.boundPods("p-c")
	if len(left) != 2 || left["c-high"] == "" {
		t.Errorf("p-c's pods %v: want c-high and one of c-low-1, c-low-2", left)
	}
	if d := c.boundPods("p-d"); d["d-low"] != "small-2" {
		t.Errorf("p-d's pods %v: d-low (another tenant, lower priority, beside the victim) was evicted", d)
	}
	if after := c.boundPods("p-a"); len(after) != len(before) {
		t.Errorf("p-a's pods %v, were %v", after, before)
	}
}

// boundAtMostOnce: no pod of the test was bound twice (one Scheduled event
// at most per pod UID, whatever its namespace).
func boundAtMostOnce(t *testing.T, c *cluster) {
	evs, err := c.client.CoreV1().Events(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=Scheduled"})
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	names := map[string]string{}
	for _, e := range evs.Items {
		count := max(1, int(e.Count))
		if e.Series != nil {
			count = max(count, int(e.Series.Count))
		}
		n[string(e.InvolvedObject.UID)] += count
		names[string(e.InvolvedObject.UID)] = e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
	}
	var twice []string
	for uid, k := range n {
		if k > 1 {
			twice = append(twice, fmt.Sprintf("%s (%d)", names[uid], k))
		}
	}
	sort.Strings(twice)
	if len(twice) > 0 {
		t.Errorf("pods bound more than once: %v", twice)
	}
	t.Logf("%d pods bound, each once", len(n))
}

// nodeLabel is a label each node of the test carries, its name, for pods
// meant for one node.
const nodeLabel = "e2e.wasmsched.io/node"

// sizedNode creates a node with cpu cores, labelled pool=pool.
func (c *cluster) sizedNode(name, cpu, pool string) {
	c.t.Helper()
	n := c.node(name, labels("pool", pool, nodeLabel, name))
	n.Status.Allocatable[v1.ResourceCPU] = resource.MustParse(cpu)
	n.Status.Capacity[v1.ResourceCPU] = resource.MustParse(cpu)
	if _, err := c.client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// quotaPod creates a pod of namespace ns requesting one core, for the
// nodes of pool, deleted at once when evicted (no kubelet here to confirm
// a graceful deletion).
func (c *cluster) quotaPod(ns, name, pool string, mutate ...func(*v1.Pod)) {
	c.t.Helper()
	p := quotaPodSpec(ns, name, pool)
	for _, m := range mutate {
		m(p)
	}
	if _, err := c.client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
}

func quotaPodSpec(ns, name, pool string) *v1.Pod {
	zero := int64(0)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1.PodSpec{NodeSelector: labels("pool", pool), TerminationGracePeriodSeconds: &zero,
			Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}}},
	}
}

// draPod creates a pod of the draScheduler profile in namespace dra, for
// the node named, or any node.
func (c *cluster) draPod(name string, node ...string) {
	c.t.Helper()
	zero := int64(0)
	c.pod(name, func(p *v1.Pod) {
		p.Namespace = "dra"
		p.Spec.SchedulerName = draScheduler
		p.Spec.TerminationGracePeriodSeconds = &zero
		if len(node) > 0 {
			p.Spec.NodeSelector = labels(nodeLabel, node[0])
		}
	})
}

// resourceSlice creates or replaces the ResourceSlice of gpuDriver for
// node, listing devices devices.
func (c *cluster) resourceSlice(node string, devices int) {
	c.t.Helper()
	ctx := context.Background()
	ds := make([]resourcev1.Device, devices)
	for i := range ds {
		ds[i] = resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i)}
	}
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: gpuDriver, Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}, NodeName: &node, Devices: ds}}
	rs := c.client.ResourceV1().ResourceSlices()
	old, err := rs.Get(ctx, s.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = rs.Create(ctx, s, metav1.CreateOptions{})
	case err == nil:
		old.Spec = s.Spec
		old.Spec.Pool.Generation++
		_, err = rs.Update(ctx, old, metav1.UpdateOptions{})
	}
	if err != nil {
		c.t.Fatalf("ResourceSlice for %s: %v", node, err)
	}
}

// elasticQuota creates or replaces the ElasticQuota of namespace ns, with
// min and max cores.
func (c *cluster) elasticQuota(ns, minCPU, maxCPU string) {
	c.t.Helper()
	res := c.dynamic().Resource(elasticQuotaGVR).Namespace(ns)
	spec := map[string]any{"min": map[string]any{"cpu": minCPU}, "max": map[string]any{"cpu": maxCPU}}
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := res.Get(ctx, "quota", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			u = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
				"metadata": map[string]any{"name": "quota", "namespace": ns}, "spec": spec}}
			_, err = res.Create(ctx, u, metav1.CreateOptions{})
			return err == nil, err
		}
		if err != nil {
			return false, err
		}
		u.Object["spec"] = spec
		_, err = res.Update(ctx, u, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		c.t.Fatalf("ElasticQuota %s/quota: %v", ns, err)
	}
}

// quotaSeen waits until the quota policy reads the ElasticQuota of ns: a
// pod of ns requesting more cores than any node has is refused for the
// tenant's max, not only for the nodes' lack of cpu, once the scheduler
// has the quota (a change of it requeues the pod). The pod is then
// deleted. ElasticQuota changes reach the scheduler in order: those made
// before are seen too.
func (c *cluster) quotaSeen(ns string) {
	c.t.Helper()
	const name = "quota-seen"
	// Tried before the policy had the ElasticQuota, the pod is rejected by
	// resource fit alone, and nothing retries it soon: a quota change
	// retries only the pods the quota policy rejected. Such a pod is
	// created anew.
	want := "quota: tenant " + ns + " would exceed its max of cpu"
	for i := 0; ; i++ {
		c.quotaPod(ns, name, "big", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("1000") })
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 3*time.Second, true, func(context.Context) (bool, error) {
			return strings.Contains(c.failedMessage(ns, name), want), nil
		})
		if err == nil {
			break
		}
		if i == 10 {
			c.t.Fatalf("pod %s/%s: no FailedScheduling saying %q; got %q", ns, name, want, c.failedMessage(ns, name))
		}
		c.deletePod(ns, name)
		waitFor(c.t, "pod "+ns+"/"+name+" deleted", 10*time.Second, func() bool {
			_, err := c.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
	}
	c.stayUnboundIn(ns, name, 0)
	c.deletePod(ns, name)
	waitFor(c.t, "pod "+ns+"/"+name+" deleted", 10*time.Second, func() bool {
		_, err := c.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// clearTenants deletes the pods and ElasticQuotas of the namespaces and
// waits until their pods are gone.
func (c *cluster) clearTenants(namespaces ...string) {
	c.t.Helper()
	ctx := context.Background()
	zero := int64(0)
	for _, ns := range namespaces {
		if err := c.client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
			c.t.Fatal(err)
		}
		if err := c.dynamic().Resource(elasticQuotaGVR).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			c.t.Fatal(err)
		}
	}
	waitFor(c.t, "the tenants' pods deleted", 30*time.Second, func() bool {
		for _, ns := range namespaces {
			if l, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) > 0 {
				return false
			}
		}
		return true
	})
}

func (c *cluster) deletePod(ns, name string) {
	c.t.Helper()
	zero := int64(0)
	if err := c.client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		c.t.Fatal(err)
	}
}

// boundPods returns the bound pods of ns that are not being deleted, by
// name, with their nodes.
func (c *cluster) boundPods(ns string) map[string]string {
	c.t.Helper()
	l, err := c.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range l.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			out[p.Name] = p.Spec.NodeName
		}
	}
	return out
}

// waitBoundIn waits for a pod of ns to be bound and returns its node.
func (c *cluster) waitBoundIn(ns, name string) string {
	c.t.Helper()
	var node string
	err := testwasm.Poll(c.t, 50*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		p, err := c.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = p.Spec.NodeName
		return node != "", nil
	})
	if err != nil {
		c.t.Fatalf("pod %s/%s not bound at %s: %v; FailedScheduling %v: %q", ns, name, time.Now().Format(time.StampMilli), err, c.failedTimes(ns, name), c.failedMessage(ns, name))
	}
	return node
}

// failedMessages returns the messages of a pod's FailedScheduling events,
// oldest first.
func (c *cluster) failedMessages(ns, name string) []string {
	c.t.Helper()
	evs, err := c.client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=FailedScheduling"})
	if err != nil {
		c.t.Fatal(err)
	}
	sort.Slice(evs.Items, func(i, j int) bool { return evs.Items[i].CreationTimestamp.Before(&evs.Items[j].CreationTimestamp) })
	var out []string
	for _, e := range evs.Items {
		out = append(out, e.Message)
	}
	return out
}

// failedTimes returns when a pod's FailedScheduling events were last
// seen, for diagnostics.
func (c *cluster) failedTimes(ns, name string) []string {
	evs, err := c.client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=FailedScheduling"})
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range evs.Items {
		out = append(out, fmt.Sprintf("first %s last %s count %d", e.FirstTimestamp.Format(time.StampMilli), e.LastTimestamp.Format(time.StampMilli), e.Count))
	}
	return out
}

// failedMessage returns a pod's FailedScheduling messages, joined.
func (c *cluster) failedMessage(ns, name string) string {
	return strings.Join(c.failedMessages(ns, name), " | ")
}

// waitFailedIn waits for a FailedScheduling event of a pod of ns whose
// message contains want, and checks that the pod is unbound.
func (c *cluster) waitFailedIn(ns, name, want string) {
	c.t.Helper()
	err := testwasm.Poll(c.t, 100*time.Millisecond, 30*time.Second, func(context.Context) (bool, error) {
		return strings.Contains(c.failedMessage(ns, name), want), nil
	})
	if err != nil {
		c.t.Fatalf("pod %s/%s: no FailedScheduling saying %q; got %q", ns, name, want, c.failedMessage(ns, name))
	}
	c.stayUnboundIn(ns, name, 0)
}

// stayUnboundIn checks that a pod of ns is still unbound after d.
func (c *cluster) stayUnboundIn(ns, name string, d time.Duration) {
	c.t.Helper()
	time.Sleep(d)
	p, err := c.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	if p.Spec.NodeName != "" {
		c.t.Fatalf("pod %s/%s bound to %s, want it unbound", ns, name, p.Spec.NodeName)
	}
}

// waitSettled waits until each of the n pods of ns is bound or has a
// FailedScheduling event containing want, then a little longer, and
// returns the bound ones.
func (c *cluster) waitSettled(ns string, n int, want string) map[string]string {
	c.t.Helper()
	settled := func() bool {
		l, err := c.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(l.Items) != n {
			return false
		}
		for _, p := range l.Items {
			if p.Spec.NodeName == "" && !strings.Contains(c.failedMessage(ns, p.Name), want) {
				return false
			}
		}
		return true
	}
	waitFor(c.t, fmt.Sprintf("%d pods of %s bound or refused", n, ns), 30*time.Second, settled)
	time.Sleep(500 * time.Millisecond)
	return c.boundPods(ns)
}
