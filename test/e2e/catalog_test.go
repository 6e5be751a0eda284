package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/host/lifecycle"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/plugin"
	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// selecting returns a tweak that makes the WasmPolicy arguments select
// SchedulingPolicies by name, with a short probation.
func selecting(probation string, names ...string) func(cfg map[string]any) {
	return func(cfg map[string]any) {
		prof := cfg["profiles"].([]any)[0].(map[string]any)
		prof["pluginConfig"] = []any{map[string]any{"name": plugin.Name, "args": map[string]any{
			"namespace":          policyNamespace,
			"schedulingPolicies": map[string]any{"names": names},
			"probation":          probation,
		}}}
	}
}

func (c *cluster) dynamic() dynamic.Interface { return dynamic.NewForConfigOrDie(c.cp.RestConfig()) }

// installCRD installs the SchedulingPolicy CRD and the policies' namespace.
func (c *cluster) installCRD() {
	c.t.Helper()
	if err := api.Install(context.Background(), c.dynamic()); err != nil {
		c.t.Fatal(err)
	}
	c.namespace(policyNamespace)
}

// pushModule writes a module's content-addressed chunks (as `wasmsched
// push` does, without its checks) and returns its digest.
func (c *cluster) pushModule(module []byte) string {
	c.t.Helper()
	cms, err := source.PackModule(policyNamespace, module)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, cm := range cms {
		_, err := c.client.CoreV1().ConfigMaps(policyNamespace).Create(context.Background(), cm, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			c.t.Fatal(err)
		}
	}
	return source.Digest(module)
}

// applyPolicy creates or replaces a SchedulingPolicy's spec.
func (c *cluster) applyPolicy(name string, spec map[string]any) {
	c.t.Helper()
	res := c.dynamic().Resource(api.GVR).Namespace(policyNamespace)
	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			u = &unstructured.Unstructured{Object: map[string]any{"apiVersion": api.GroupVersion.String(), "kind": api.Kind,
				"metadata": map[string]any{"name": name, "namespace": policyNamespace}, "spec": spec}}
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
		c.t.Fatalf("apply SchedulingPolicy %s: %v", name, err)
	}
}

func (c *cluster) getPolicy(name string) *api.SchedulingPolicy {
	c.t.Helper()
	u, err := c.dynamic().Resource(api.GVR).Namespace(policyNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	sp, err := api.FromUnstructured(u)
	if err != nil {
		c.t.Fatal(err)
	}
	return sp
}

// waitPolicy polls a SchedulingPolicy until done holds, and returns it.
func (c *cluster) waitPolicy(name, what string, timeout time.Duration, done func(*api.SchedulingPolicy) bool) *api.SchedulingPolicy {
	c.t.Helper()
	var sp *api.SchedulingPolicy
	err := testwasm.Poll(c.t, 50*time.Millisecond, timeout, func(ctx context.Context) (bool, error) {
		u, err := c.dynamic().Resource(api.GVR).Namespace(policyNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		sp, err = api.FromUnstructured(u)
		return err == nil && done(sp), nil
	})
	if err != nil {
		b, _ := json.MarshalIndent(sp, "", "  ")
		c.t.Fatalf("SchedulingPolicy %s: not %s within %v; last seen:\n%s", name, what, timeout, b)
	}
	return sp
}

func condition(sp *api.SchedulingPolicy, t string) metav1.Condition {
	if c := meta.FindStatusCondition(sp.Status.Conditions, t); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// servingKey: the policy serves revision key, and its Ready condition is
// as wanted.
func servingKey(key string, ready metav1.ConditionStatus) func(*api.SchedulingPolicy) bool {
	return func(sp *api.SchedulingPolicy) bool {
		return sp.Status.Serving != nil && sp.Status.Serving.Key == key && condition(sp, api.ConditionReady).Status == ready
	}
}

func pinSpec(digest string, nodes ...string) map[string]any {
	ns := make([]any, len(nodes))
	for i, n := range nodes {
		ns[i] = n
	}
	return map[string]any{"module": map[string]any{"sha256": digest}, "settings": map[string]any{"nodes": ns}}
}

func revisionKey(t *testing.T, spec map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(spec)
	var s api.SchedulingPolicySpec
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return api.RevisionOf(&s).Key
}

// policyEvents returns the messages of the Events with reason on a
// SchedulingPolicy.
func (c *cluster) policyEvents(name, reason string) []string {
	c.t.Helper()
	evs, err := c.client.EventsV1().Events(policyNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		if e.Regarding.Kind == api.Kind && e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}

// A SchedulingPolicy is applied, its settings changed, broken in three
// ways and deleted while the scheduler runs: each change is a kubectl
// apply, settings reload like modules, every refusal keeps the serving
// revision and says why in status and an Event, and pods follow.
func TestSchedulingPolicyLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	c := startCluster(t, nil)
	c.installCRD()
	for _, n := range []string{"n1", "n2", "n3"} {
		c.node(n, nil)
	}
	digest := c.pushModule(testwasm.Bytes(t, "examples/nodepin"))
	first := pinSpec(digest, "n1")
	c.applyPolicy("pin", first)
	restartScheduler(t, c, nil, selecting("2s", "pin"))

	sp := c.waitPolicy("pin", "serving", 30*time.Second, servingKey(revisionKey(t, first), metav1.ConditionTrue))
	if sp.Status.ServingDigest != digest[:12] || sp.Status.ObservedGeneration != sp.Generation || condition(sp, api.ConditionRejected).Status != metav1.ConditionFalse {
		t.Errorf("status after the first apply: servingDigest %q observedGeneration %d/%d rejected %+v", sp.Status.ServingDigest,
			sp.Status.ObservedGeneration, sp.Generation, condition(sp, api.ConditionRejected))
	}
	c.pod("a")
	if n := c.waitBound("a", 30*time.Second); n != "n1" {
		t.Fatalf("pod a on %s, want n1", n)
	}
	// Probation passes: the revision becomes the last good one.
	sp = c.waitPolicy("pin", "proven", 30*time.Second, func(sp *api.SchedulingPolicy) bool {
		return sp.Status.LastGood != nil && sp.Status.LastGood.Key == revisionKey(t, first) && len(sp.Status.History) == 1
	})
	if r := sp.Status.Replicas; len(r) != 1 || !r[0].Ready || r[0].Probation != nil {
		t.Errorf("replica entries %+v: want one, ready, off probation", r)
	}

	// Settings are hot-reloaded.
	second := pinSpec(digest, "n2")
	start := time.Now()
	c.applyPolicy("pin", second)
	c.waitPolicy("pin", "serving the new settings", 30*time.Second, servingKey(revisionKey(t, second), metav1.ConditionTrue))
	t.Logf("settings change to serving: %v", time.Since(start))
	c.pod("b")
	if n := c.waitBound("b", 30*time.Second); n != "n2" {
		t.Fatalf("pod b on %s, want n2 (the new settings)", n)
	}

	// Settings the policy rejects: refused, the previous revision serves.
	bad := map[string]any{"module": map[string]any{"sha256": digest}, "settings": map[string]any{"nodes": []any{}}}
	c.applyPolicy("pin", bad)
	sp = c.waitPolicy("pin", "rejecting the settings", 30*time.Second, func(sp *api.SchedulingPolicy) bool {
		return condition(sp, api.ConditionRejected).Status == metav1.ConditionTrue && sp.Status.ObservedGeneration == sp.Generation
	})
	rej, ready := condition(sp, api.ConditionRejected), condition(sp, api.ConditionReady)
	if rej.Reason != api.ReasonLoadFailed || !strings.Contains(rej.Message, `"nodes" must list at least one node`) {
		t.Errorf("Rejected = %+v, want LoadFailed naming the policy's settings error", rej)
	}
	if ready.Status != metav1.ConditionFalse || ready.Reason != api.ReasonServingLastGood || sp.Status.Serving.Key != revisionKey(t, second) {
		t.Errorf("Ready = %+v, serving %+v: want the previous revision serving", ready, sp.Status.Serving)
	}
	c.pod("c")
	if n := c.waitBound("c", 30*time.Second); n != "n2" {
		t.Fatalf("pod c on %s, want n2 (the previous revision)", n)
	}

	// A digest whose chunks do not exist, then bytes that are not a
	// policy: each refusal's Event carries its own message.
	missing := strings.Repeat("ab", 32)
	c.applyPolicy("pin", pinSpec(missing, "n3"))
	sp = c.waitPolicy("pin", "refusing the missing module", 30*time.Second, func(sp *api.SchedulingPolicy) bool {
		r := condition(sp, api.ConditionRejected)
		return r.Reason == api.ReasonFetch && sp.Status.ObservedGeneration == sp.Generation
	})
	if m := condition(sp, api.ConditionRejected).Message; !strings.Contains(m, "not found") || !strings.Contains(m, api.ModuleName(missing)) {
		t.Errorf("Rejected message %q: want it to name the missing chunk", m)
	}
	// A damaged chunk: the module's chunk ConfigMap exists under its
	// content-addressed name, but its payload is not what it declares.
	damaged := strings.Repeat("cd", 32)
	cms, err := source.PackModule(policyNamespace, testwasm.Bytes(t, "examples/nodepin"))
	if err != nil {
		t.Fatal(err)
	}
	for i, cm := range cms {
		broken := cm.DeepCopy()
		broken.Name = source.ChunkName(api.ModuleName(damaged), i)
		broken.Labels[source.LabelPolicy], broken.Labels[source.LabelModule] = api.ModuleName(damaged), api.ModuleName(damaged)
		broken.Annotations[source.AnnotationSHA256] = damaged
		if i == 0 {
			broken.BinaryData[source.DataKey] = []byte("garbage")
		}
		if _, err := c.client.CoreV1().ConfigMaps(policyNamespace).Create(context.Background(), broken, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.applyPolicy("pin", pinSpec(damaged, "n3"))
	sp = c.waitPolicy("pin", "refusing the damaged chunk", 30*time.Second, func(sp *api.SchedulingPolicy) bool {
		return condition(sp, api.ConditionRejected).Reason == api.ReasonFetch && sp.Status.ObservedGeneration == sp.Generation
	})
	if m := condition(sp, api.ConditionRejected).Message; !strings.Contains(m, source.ChunkName(api.ModuleName(damaged), 0)) || !strings.Contains(m, "sha256 mismatch") {
		t.Errorf("Rejected message %q: want the damaged chunk named", m)
	}

	junk := c.pushModule([]byte("\x00asm\x01\x00\x00\x00 this is no policy"))
	c.applyPolicy("pin", pinSpec(junk, "n3"))
	c.waitPolicy("pin", "refusing the junk module", 30*time.Second, func(sp *api.SchedulingPolicy) bool {
		return condition(sp, api.ConditionRejected).Reason == api.ReasonLoadFailed && sp.Status.ObservedGeneration == sp.Generation
	})
	// A URL serving other bytes than the digest names.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("other bytes")) }))
	defer srv.Close()
	c.applyPolicy("pin", map[string]any{"module": map[string]any{"sha256": digest, "url": srv.URL + "/pin.wasm"}, "settings": map[string]any{"nodes": []any{"n3"}}})
	sp = c.waitPolicy("pin", "refusing the URL's bytes", 30*time.Second, func(sp *api.SchedulingPolicy) bool {
		return condition(sp, api.ConditionRejected).Reason == api.ReasonFetch && sp.Status.ObservedGeneration == sp.Generation
	})
	if m := condition(sp, api.ConditionRejected).Message; !strings.Contains(m, "sha256 mismatch") {
		t.Errorf("Rejected message %q: want the digest mismatch named", m)
	}
	var notes []string
	// Events are recorded asynchronously: wait for the four (a loaded
	// machine may take longer than a quiet one's 10 s; what is missing is
	// reported below).
	_ = testwasm.Poll(t, 100*time.Millisecond, 10*time.Second, func(context.Context) (bool, error) {
		notes = c.policyEvents("pin", "PolicyRejected")
		return len(notes) >= 4, nil
	})
	joined := strings.Join(notes, "\n")
	for _, want := range []string{`must list at least one node`, "not found", junk[:12], "sha256 mismatch"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no PolicyRejected Event says %q; Events:\n%s", want, joined)
		}
	}
	c.pod("d")
	if n := c.waitBound("d", 30*time.Second); n != "n2" {
		t.Fatalf("pod d on %s, want n2: refusals must not change what serves", n)
	}

	// Deleted: a policy named in the arguments is required, so pods wait,
	// with the reason; re-created, it serves and they bind.
	if err := c.dynamic().Resource(api.GVR).Namespace(policyNamespace).Delete(context.Background(), "pin", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	c.pod("e")
	if msg := c.waitUnschedulable("e", 30*time.Second); !strings.Contains(msg, "SchedulingPolicy "+policyNamespace+"/pin does not exist") {
		t.Errorf("pod e: %q, want the missing policy named", msg)
	}
	third := pinSpec(digest, "n3")
	c.applyPolicy("pin", third)
	if n := c.waitBound("e", 30*time.Second); n != "n3" {
		t.Fatalf("pod e on %s, want n3 once the policy is back", n)
	}
}

// podsBoundOnce checks that every pod in default is bound and was bound
// exactly once (one Scheduled event each).
func (c *cluster) podsBoundOnce(n int) map[string]string {
	c.t.Helper()
	nodes := c.waitAllBound(n, 2*time.Minute)
	var twice []string
	for pod, k := range c.scheduledEvents() {
		if k > 1 {
			twice = append(twice, fmt.Sprintf("%s (%d)", pod, k))
		}
	}
	if len(twice) > 0 {
		c.t.Errorf("pods bound more than once: %v", twice)
	}
	return nodes
}

// streamPods creates a pod every interval (stream-0, stream-1, ...) until
// the returned stop is called; stop returns how many were created.
func (c *cluster) streamPods(interval time.Duration) (stop func() int) {
	done, finished := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				finished <- n
				return
			case <-t.C:
			}
			p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("stream-%d", n), Namespace: "default"},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
			if _, err := c.client.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err == nil {
				n++
			}
		}
	}()
	return func() int { close(done); return <-finished }
}

// The scheduler (a subprocess) is killed and restarted at the bad moments
// of a policy's life while pods stream in: with a broken revision in the
// spec, with a new revision still on probation, with the serving
// module's chunks deleted. It always comes back serving what it can (the
// last good revision, or nothing, refusing pods with the reason, when
// nothing loads), never crash-loops, and at the end every pod is bound
// exactly once.
func TestSchedulingPolicyRestarts(t *testing.T) {
	c := startCluster(t, nil)
	c.installCRD()
	for _, n := range []string{"n1", "n2", "n3"} {
		c.node(n, nil)
	}
	module := testwasm.Bytes(t, "examples/nodepin")
	precompile(t, module)
	digest := c.pushModule(module)
	good := pinSpec(digest, "n1", "n2")
	goodKey := revisionKey(t, good)
	c.applyPolicy("pin", good)
	config := schedulerConfig(t, t.TempDir(), c.kubeconfig, nil, selecting("10s", "pin"))
	start := func(name string) *replica {
		t.Helper()
		began := time.Now()
		r := startReplica(t, name, config)
		waitFor(t, name+" scheduling", 60*time.Second, func() bool { r.running(); return strings.Contains(r.out.String(), "Starting Kubernetes Scheduler") })
		t.Logf("%s: started in %v", name, time.Since(began))
		return r
	}
	r := start("first")
	c.waitPolicy("pin", "proven", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return sp.Status.LastGood != nil && sp.Status.LastGood.Key == goodKey
	})
	stop := c.streamPods(300 * time.Millisecond)

	// 1. The spec names bytes that are no policy; the running scheduler
	// refuses them, and after a restart serves the last good revision.
	junk := c.pushModule([]byte("\x00asm\x01\x00\x00\x00 not a policy"))
	c.applyPolicy("pin", pinSpec(junk, "n3"))
	c.waitPolicy("pin", "refusing the junk", 30*time.Second, func(sp *api.SchedulingPolicy) bool {
		return condition(sp, api.ConditionRejected).Reason == api.ReasonLoadFailed && sp.Status.ObservedGeneration == sp.Generation
	})
	r.kill()
	// start returns once kube-scheduler logs that it starts scheduling,
	// which it does after the plugin's start-up: the fallback to the last
	// good revision is loaded by then. Its time is the restart-to-serving
	// time with a broken revision in the spec.
	r = start("after-junk")
	sp := c.waitPolicy("pin", "serving the last good revision", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return servingKey(goodKey, metav1.ConditionFalse)(sp) && condition(sp, api.ConditionReady).Reason == api.ReasonServingLastGood
	})
	if m := condition(sp, api.ConditionRejected).Message; !strings.Contains(m, junk[:12]) {
		t.Errorf("Rejected message %q does not name the refused module", m)
	}
	c.pod("probe-1")
	if n := c.waitBound("probe-1", 30*time.Second); n == "n3" {
		t.Errorf("probe-1 on n3: the refused revision's settings applied")
	}

	// 2. A good new revision starts serving; the scheduler dies within its
	// probation. At the next start it is quarantined and the last good
	// revision serves.
	next := pinSpec(digest, "n3")
	nextKey := revisionKey(t, next)
	c.applyPolicy("pin", next)
	c.waitPolicy("pin", "serving the new revision on probation", 30*time.Second, func(sp *api.SchedulingPolicy) bool {
		rs := sp.Status.Replicas
		return len(rs) == 1 && rs[0].Probation != nil && rs[0].Probation.Key == nextKey && rs[0].Key == nextKey
	})
	r.kill()
	r = start("after-probation-death")
	sp = c.waitPolicy("pin", "quarantining the revision", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return servingKey(goodKey, metav1.ConditionFalse)(sp) && condition(sp, api.ConditionReady).Reason == api.ReasonQuarantined &&
			len(sp.Status.Quarantined) == 1
	})
	if q := sp.Status.Quarantined[0]; q.Key != nextKey || !strings.Contains(q.Reason, "within the probation") {
		t.Errorf("quarantined %+v, want %s with the reason", q, nextKey)
	}
	waitFor(t, "a PolicyQuarantined Event", 20*time.Second, func() bool {
		ev := c.policyEvents("pin", "PolicyQuarantined")
		return len(ev) > 0 && strings.Contains(ev[0], "quarantined") && strings.Contains(ev[0], "last good revision")
	})
	c.pod("probe-2")
	if n := c.waitBound("probe-2", 30*time.Second); n == "n3" {
		t.Errorf("probe-2 on n3: the quarantined revision serves")
	}

	// 3. The module's chunks are deleted (the serving one's too): the
	// running scheduler keeps what it has in memory; restarted, nothing
	// loads, and pods wait with the reason instead of the scheduler
	// crash-looping. Pushing again brings it back.
	if err := c.client.CoreV1().ConfigMaps(policyNamespace).DeleteCollection(context.Background(), metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: source.LabelModule + "=" + api.ModuleName(digest)}); err != nil {
		t.Fatal(err)
	}
	c.pod("probe-3")
	if n := c.waitBound("probe-3", 30*time.Second); n == "n3" {
		t.Errorf("probe-3 on n3")
	}
	r.kill()
	r = start("after-chunks-deleted")
	c.pod("probe-4")
	if msg := c.waitUnschedulable("probe-4", 60*time.Second); !strings.Contains(msg, "policy pin cannot serve") || !strings.Contains(msg, "not found") {
		t.Errorf("probe-4: %q, want the policy and the missing module named", msg)
	}
	r.running()
	c.pushModule(module)
	final := pinSpec(digest, "n1", "n2", "n3")
	c.applyPolicy("pin", final)
	c.waitPolicy("pin", "serving again", 60*time.Second, servingKey(revisionKey(t, final), metav1.ConditionTrue))

	n := stop()
	t.Logf("%d pods streamed", n)
	c.podsBoundOnce(n + 4)
	r.running() // without leader election, kube-scheduler exits 1 when stopped: kill it
	r.kill()
	r.checkRaces()
}

// The status ConfigMap of statically configured policies is written even
// when the namespace appears after the scheduler started (the write is
// retried), and the reports of replicas that stopped refreshing theirs are
// pruned.
func TestStatusConfigMapRetriesAndPrunes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	c := startCluster(t, []policy{{Name: "pin", Package: "examples/nodepin", Settings: `{"nodes": ["n1"]}`}})
	time.Sleep(2 * time.Second) // the first writes fail: no namespace yet
	c.namespace(policyNamespace)
	stale, _ := json.Marshal(lifecycle.Status{Replica: "gone", Profile: "default-scheduler", Updated: time.Now().Add(-time.Hour)})
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: lifecycle.StatusConfigMap, Namespace: policyNamespace},
		Data: map[string]string{"gone.default-scheduler.json": string(stale)}}
	if _, err := c.client.CoreV1().ConfigMaps(policyNamespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	waitFor(t, "the status written and the stale report pruned", 60*time.Second, func() bool {
		cm, err := c.client.CoreV1().ConfigMaps(policyNamespace).Get(context.Background(), lifecycle.StatusConfigMap, metav1.GetOptions{})
		if err != nil {
			return false
		}
		_, stale := cm.Data["gone.default-scheduler.json"]
		return len(cm.Data) == 1 && !stale
	})
}

// Two different bad uploads of a statically configured ConfigMap policy
// leave two PolicyRejected Events, each with its own reason: the second is
// not folded into the first's series under the first's message.
func TestRejectedEventsCarryTheirOwnMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	c := startCluster(t, nil)
	c.namespace(policyNamespace)
	c.upload("pin", testwasm.Bytes(t, "examples/nodepin"))
	restartScheduler(t, c, []policy{{Name: "pin", ConfigMap: "pin", Settings: `{"nodes": ["n1"]}`}})
	c.corrupt("pin")
	c.waitRejections(policyNamespace, 1, 30*time.Second)
	c.upload("pin", []byte("\x00asm\x01\x00\x00\x00 not a policy"))
	waitFor(t, "two PolicyRejected Events with their own messages", 30*time.Second, func() bool {
		evs, err := c.client.EventsV1().Events(policyNamespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		var damaged, wasm bool
		for _, e := range evs.Items {
			if e.Reason != "PolicyRejected" {
				continue
			}
			damaged = damaged || strings.Contains(e.Note, "chunk sha256 mismatch")
			wasm = wasm || strings.Contains(e.Note, "not a valid WebAssembly module")
		}
		return damaged && wasm
	})
}

// selectingLabel returns a tweak that selects SchedulingPolicies by the
// label wasmsched.io/profile=e2e.
func selectingLabel(probation string) func(cfg map[string]any) {
	return func(cfg map[string]any) {
		prof := cfg["profiles"].([]any)[0].(map[string]any)
		prof["pluginConfig"] = []any{map[string]any{"name": plugin.Name, "args": map[string]any{
			"namespace":          policyNamespace,
			"schedulingPolicies": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"wasmsched.io/profile": "e2e"}}},
			"probation":          probation,
		}}}
	}
}

// labelPolicy labels a SchedulingPolicy for selectingLabel's profile.
func (c *cluster) labelPolicy(name string) {
	c.t.Helper()
	res := c.dynamic().Resource(api.GVR).Namespace(policyNamespace)
	u, err := res.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	u.SetLabels(map[string]string{"wasmsched.io/profile": "e2e"})
	if _, err := res.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// With a label selector, policies come and go with their labels: a Shadow
// SchedulingPolicy runs beside the one it shadows, never changing
// placement, its disagreements counted; a shadow of a policy the profile
// does not run is reported; a new module (never compiled) and its
// removal take effect without a restart.
func TestSchedulingPolicySelectorAndShadow(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	c := startCluster(t, nil)
	c.installCRD()
	for _, n := range []string{"n1", "n2"} {
		c.node(n, nil)
	}
	module := testwasm.Bytes(t, "examples/nodepin")
	digest := c.pushModule(module)
	c.applyPolicy("pin", pinSpec(digest, "n1"))
	c.labelPolicy("pin")
	restartScheduler(t, c, nil, selectingLabel("1h"))
	c.waitPolicy("pin", "serving", 30*time.Second, servingKey(revisionKey(t, pinSpec(digest, "n1")), metav1.ConditionTrue))

	canary := pinSpec(digest, "n2")
	canary["mode"], canary["shadows"] = "Shadow", "pin"
	c.applyPolicy("canary", canary)
	c.labelPolicy("canary")
	c.waitPolicy("canary", "serving", 30*time.Second, servingKey(revisionKey(t, canary), metav1.ConditionTrue))
	labels := map[string]string{"policy": "pin", "shadow": "canary", "point": "filter"}
	before := metricValue(t, "wasmsched_shadow_disagreements_total", labels)
	c.pod("a")
	if n := c.waitBound("a", 30*time.Second); n != "n1" {
		t.Fatalf("pod a on %s: the shadow changed placement", n)
	}
	if d := metricValue(t, "wasmsched_shadow_disagreements_total", labels) - before; d != 2 {
		t.Errorf("%g Filter disagreements, want 2 (n1 and n2 judged oppositely)", d)
	}

	ghost := pinSpec(digest, "n2")
	ghost["mode"], ghost["shadows"] = "Shadow", "ghost"
	c.applyPolicy("lost", ghost)
	c.labelPolicy("lost")
	waitFor(t, "a PolicyShadowsNothing Event", 30*time.Second, func() bool {
		ev := c.policyEvents("lost", "PolicyShadowsNothing")
		return len(ev) == 1 && strings.Contains(ev[0], `"ghost"`)
	})

	// A module never compiled before (nodepin with a custom section: new
	// bytes, same rules): from the apply to serving, compile included.
	fresh := append(append([]byte(nil), module...), 0, 6, 5, 'n', 'o', 't', 'e', '!')
	freshDigest := c.pushModule(fresh)
	moved := pinSpec(freshDigest, "n2")
	start := time.Now()
	c.applyPolicy("pin", moved)
	c.waitPolicy("pin", "serving the new module", 60*time.Second, servingKey(revisionKey(t, moved), metav1.ConditionTrue))
	t.Logf("apply to serving, a module never compiled (%d bytes): %v", len(fresh), time.Since(start))
	c.pod("b")
	if n := c.waitBound("b", 30*time.Second); n != "n2" {
		t.Fatalf("pod b on %s, want n2", n)
	}

	// Unlabelled, the policy stops applying: pods go anywhere.
	res := c.dynamic().Resource(api.GVR).Namespace(policyNamespace)
	u, err := res.Get(context.Background(), "pin", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetLabels(nil)
	if _, err := res.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "this replica's status entry removed", 30*time.Second, func() bool {
		return len(c.getPolicy("pin").Status.Replicas) == 0
	})
	for i := range 6 {
		c.pod(fmt.Sprintf("free-%d", i))
	}
	nodes := map[string]bool{}
	for i := range 6 {
		nodes[c.waitBound(fmt.Sprintf("free-%d", i), 30*time.Second)] = true
	}
	if !nodes["n1"] {
		t.Errorf("no unpinned pod on n1 (%v): the unselected policy still applies", nodes)
	}
}
