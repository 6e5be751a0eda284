package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/host/lifecycle"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/host/plugin"
	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// hostileCase is one way a policy misbehaves (docs/hostile-guests.md). The
// probe guest acts it out at one extension point, only for pods labelled
// hostile=<policy name>, so one scheduler can load every case at once and
// schedule ordinary pods through the same policies.
type hostileCase struct {
	name    string // the policies are <name>-fail and <name>-ignore
	at, how string
	memory  string // the policies' memoryLimit, when not the default

	// The failure: counted in errors_total{point, kind}; its message is
	// "policy <name>@<version>: " and then failure.
	point, kind, failure string
	// verdict keeps the pod Pending whatever the failure policy: PostFilter
	// runs only when no node fits, Unreserve only after a rejection.
	verdict string
	// informational: the point has no verdict (Unreserve, PostBind), so
	// failurePolicy Fail cannot reject the pod.
	informational bool
	// reason, for the cases that are not failures (kind empty, one policy
	// named <name>): what the pod's condition says.
	reason []string
}

var hostileCases = []hostileCase{
	// A Go panic (a trap) at every extension point the ABI exports.
	{name: "prefilter-panic", at: "prefilter", how: "panic", point: "pre_filter", kind: "trap",
		failure: "cycle: wasm error: unreachable: panic: probe: deliberate panic in prefilter"},
	{name: "filter-panic", at: "filter", how: "panic", point: "filter", kind: "trap",
		failure: "filter: wasm error: unreachable: panic: probe: deliberate panic in filter"},
	{name: "score-panic", at: "score", how: "panic", point: "score", kind: "trap",
		failure: "score: wasm error: unreachable: panic: probe: deliberate panic in score"},
	{name: "normalize-panic", at: "normalize", how: "panic", point: "normalize_score", kind: "trap",
		failure: "normalize_score: wasm error: unreachable: panic: probe: deliberate panic in normalize"},
	{name: "postfilter-panic", at: "postfilter", how: "panic", point: "post_filter", kind: "trap",
		failure: "post_filter: wasm error: unreachable: panic: probe: deliberate panic in postfilter",
		verdict: "probe: no node, so that PostFilter runs"},
	{name: "reserve-panic", at: "reserve", how: "panic", point: "reserve", kind: "trap",
		failure: "reserve: wasm error: unreachable: panic: probe: deliberate panic in reserve"},
	{name: "permit-panic", at: "permit", how: "panic", point: "permit", kind: "trap",
		failure: "permit: wasm error: unreachable: panic: probe: deliberate panic in permit"},
	{name: "unreserve-panic", at: "unreserve", how: "panic", point: "unreserve", kind: "trap",
		failure: "unreserve: wasm error: unreachable: panic: probe: deliberate panic in unreserve",
		verdict: "probe: rejected at Permit, so that Unreserve runs", informational: true},
	{name: "prebind-panic", at: "prebind", how: "panic", point: "pre_bind", kind: "trap",
		failure: "pre_bind: wasm error: unreachable: panic: probe: deliberate panic in prebind"},
	{name: "postbind-panic", at: "postbind", how: "panic", point: "post_bind", kind: "trap",
		failure: "post_bind: wasm error: unreachable: panic: probe: deliberate panic in postbind", informational: true},

	// Runaway calls: stopped at the deadline (200ms).
	{name: "filter-loop", at: "filter", how: "loop", point: "filter", kind: "timeout",
		failure: "filter: deadline of 200ms exceeded"},
	{name: "score-loop", at: "score", how: "loop", point: "score", kind: "timeout",
		failure: "score: deadline of 200ms exceeded"},
	{name: "filter-sleep", at: "filter", how: "sleep", point: "filter", kind: "timeout",
		failure: "filter: deadline of 200ms exceeded"},

	// Unbounded memory growth: stopped at the instance's memory limit.
	{name: "filter-grow", at: "filter", how: "grow", memory: "32Mi", point: "filter", kind: "memory",
		failure: "filter: wasm error: unreachable: fatal error: out of memory"},

	// Answers that break the ABI.
	{name: "filter-zero", at: "filter", how: "zero", point: "filter", kind: "invalid",
		failure: "filter: returned status code 0, which is not a valid code"},
	{name: "filter-code99", at: "filter", how: "code99", point: "filter", kind: "invalid",
		failure: "filter: returned status code 99, which is not a valid code"},
	{name: "score-outofrange", at: "score", how: "outofrange", point: "score", kind: "invalid",
		failure: "score: 1000 for node hostile-"},
	{name: "score-bigscore", at: "score", how: "bigscore", point: "score", kind: "guest",
		failure: "score: policy reported an error: score 1099511627776 does not fit in an int32"},
	{name: "filter-bigresult", at: "filter", how: "bigresult", point: "filter", kind: "invalid",
		failure: "filter: result of 68157702 bytes exceeds the 67108864 byte limit"},

	// Not failures: the host cuts a 4 MiB reason, and the sandbox refuses
	// files, environment and sockets; the policy carries on.
	{name: "filter-hugereason", at: "filter", how: "hugereason",
		reason: []string{"probe: huge xxxxxxxx", "... (4193292 bytes cut)"}},
	{name: "filter-wasi", at: "filter", how: "wasi",
		reason: []string{"probe: wasi: open /etc/passwd: denied; open .: denied; open /: denied; write /tmp/probe: denied; environ: empty; args: none; socket fd 3: denied; socket fd 4: denied; socket fd 5: denied"}},
}

// hostileProbe is a probe policy that misbehaves for pods labelled
// hostile=<name>.
func hostileProbe(name, at, how, failurePolicy string) policy {
	settings := fmt.Sprintf(`{"at": %q, "how": %q, "when": "hostile=%s"}`, at, how, name)
	// One instance: a call after a failure can only succeed on a fresh one.
	return policy{Name: name, Package: "test/guests/probe", Settings: settings, FailurePolicy: failurePolicy, MaxInstances: 1}
}

// hostilePolicy is hostileProbe's scheduler arguments, with extra ones.
func hostilePolicy(t *testing.T, name, at, how, failurePolicy string, extra map[string]any) map[string]any {
	a := hostileProbe(name, at, how, failurePolicy).args(t)
	for k, v := range extra {
		a[k] = v
	}
	return a
}

// Every hostile case runs in one scheduler, with failurePolicy Fail and
// Ignore, beside ordinary pods, and modules that cannot load are uploaded as
// new versions of a served policy. For each: the pod's condition or an Event
// names the policy and the failure, the failure is counted, the failed
// instance is replaced, and the other pods are bound.
func TestHostileGuests(t *testing.T) {
	c := startCluster(t, nil)
	c.namespace(policyNamespace)
	probe := testwasm.Bytes(t, "test/guests/probe")
	goodDigest := c.upload("uploaded", probe)

	var mainPolicies []any
	for _, hc := range hostileCases {
		extra := map[string]any{}
		if hc.memory != "" {
			extra["memoryLimit"] = hc.memory
		}
		if hc.kind != "timeout" {
			// Only the runaway cases meet the default 200ms deadline on
			// purpose; on a loaded machine a 65 MiB answer, a 4 MiB reason
			// or memory growth can take longer, and must fail as designed.
			extra["timeout"] = "5s"
		}
		if hc.kind == "" {
			mainPolicies = append(mainPolicies, hostilePolicy(t, hc.name, hc.at, hc.how, "Fail", extra))
			continue
		}
		mainPolicies = append(mainPolicies,
			hostilePolicy(t, hc.name+"-fail", hc.at, hc.how, "Fail", extra),
			hostilePolicy(t, hc.name+"-ignore", hc.at, hc.how, "Ignore", extra))
	}
	mainPolicies = append(mainPolicies, policy{Name: "uploaded", ConfigMap: "uploaded"}.args(t))
	startHostileScheduler(t, c, map[string][]any{"hostile": mainPolicies})

	for _, n := range []string{"hostile-a", "hostile-b", "hostile-c"} {
		c.node(n, labels("pool", "main"))
	}
	inMain := func(p *v1.Pod) {
		p.Spec.SchedulerName = "hostile"
		p.Spec.NodeSelector = labels("pool", "main")
	}

	// Modules that cannot start, uploaded as new versions of "uploaded":
	// each is refused with an error naming the policy and what is wrong,
	// and the good version keeps serving.
	engineGuest := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(testwasm.Root(t), "host", "engine", "testdata", name+".wasm"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, u := range []struct{ guest, want string }{
		{"no_score", "does not export wasmsched_score"},
		{"env_import", "imports env.foo, which the sandbox does not provide"},
		{"abi_v2", "abi_version: module speaks ABI version 2, this scheduler speaks ABI version 1"},
		{"init_trap", "_initialize: wasm error: unreachable"},
		{"filter_escape", "not a valid WebAssembly module: code section: function 6: opcode 0x24 at offset 7: global index 1 out of range (1 globals)"},
	} {
		digest := c.upload("uploaded", engineGuest(u.guest))
		msg := c.waitRejected("uploaded", digest, 60*time.Second)
		if want := "policy uploaded@" + digest[:12] + ": "; !strings.HasPrefix(msg, want) || !strings.Contains(msg, u.want) {
			t.Errorf("upload of %s: rejection %q, want it to start with %q and contain %q", u.guest, msg, want, u.want)
		}
	}
	// _initialize never returns: refused after the init deadline (10s),
	// checked at the end while the pods are scheduled meanwhile.
	loopDigest := c.upload("uploaded", engineGuest("init_loop"))

	// Ordinary pods before, hostile pods, and ordinary pods after.
	for i := range 3 {
		c.pod(fmt.Sprintf("before-%d", i), inMain)
	}
	for _, hc := range hostileCases {
		if hc.kind == "" {
			c.pod(hc.name, inMain, label("hostile", hc.name))
			continue
		}
		c.pod(hc.name+"-fail", inMain, label("hostile", hc.name+"-fail"))
		c.pod(hc.name+"-ignore", inMain, label("hostile", hc.name+"-ignore"))
	}
	for i := range 3 {
		c.waitBound(fmt.Sprintf("before-%d", i), 60*time.Second)
	}

	for _, hc := range hostileCases {
		t.Run(hc.name, func(t *testing.T) {
			if hc.kind == "" {
				c.waitCondition(t, hc.name, 60*time.Second, hc.reason...)
				return
			}
			c.checkFailure(t, hc)
		})
	}

	// Every policy still serves after its failures: with one instance
	// each, the failed instances were replaced by fresh ones, and no call
	// ever reached a broken instance.
	for i := range 3 {
		c.pod(fmt.Sprintf("after-%d", i), inMain)
	}
	for i := range 3 {
		c.waitBound(fmt.Sprintf("after-%d", i), 60*time.Second)
	}
	if v := metricValue(t, "wasmsched_policy_errors_total", map[string]string{"kind": "broken"}); v != 0 {
		t.Errorf("%v calls reached a broken instance", v)
	}
	if v := metricValue(t, "wasmsched_policy_errors_total", map[string]string{"policy": "uploaded"}); v != 0 {
		t.Errorf("the uploaded policy failed %v times", v)
	}

	msg := c.waitRejected("uploaded", loopDigest, 60*time.Second)
	if want := "policy uploaded@" + loopDigest[:12] + ": _initialize: deadline of 10s exceeded"; !strings.HasPrefix(msg, want) {
		t.Errorf("upload of init_loop: rejection %q, want %q", msg, want)
	}
	if v := metricValue(t, "wasmsched_policy_reloads_total", map[string]string{"policy": "uploaded", "result": "rejected"}); v != 6 {
		t.Errorf("wasmsched_policy_reloads_total{policy=uploaded,result=rejected} = %v, want 6", v)
	}
	// The refusals are Events on the policy's ConfigMap too (the recorder
	// folds repeats into a series, so only the first is sure to be there).
	c.waitRejections(policyNamespace, 1, 30*time.Second)
	evs, err := c.client.CoreV1().Events(policyNamespace).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=PolicyRejected"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		want := "policy uploaded: upload rejected, version " + goodDigest[:12] + " keeps serving: policy uploaded@"
		if e.InvolvedObject.Name != "uploaded-0" || !strings.HasPrefix(e.Message, want) {
			t.Errorf("PolicyRejected event on %s: %q, want it on uploaded-0 starting with %q", e.InvolvedObject.Name, e.Message, want)
		}
	}
	c.waitActive("uploaded", goodDigest, 10*time.Second)

}

// One Filter call in a thousand sleeps (Fail) or spins (Ignore) past its
// deadline: 25 pods against 50 nodes make 1250 calls per policy. Either way
// the timeout is counted once, every pod is bound and no call reaches a
// failed instance: with Fail the node whose call failed is rejected for
// that pod, with Ignore the policy is skipped for that attempt (or, when
// the plugin filters a cycle's nodes in one batch, the batch is redone node
// by node on a fresh instance, which does not fail).
func TestHostileGuestRareDeadline(t *testing.T) {
	c := startCluster(t, nil)
	c.namespace(policyNamespace)
	startHostileScheduler(t, c, map[string][]any{"hostile-rare": {
		hostilePolicy(t, "rare-fail", "filter", "sleep", "Fail", map[string]any{"settings": json.RawMessage(`{"at": "filter", "how": "sleep", "every": 1000, "when": "hostile=rare-fail"}`)}),
		hostilePolicy(t, "rare-ignore", "filter", "loop", "Ignore", map[string]any{"settings": json.RawMessage(`{"at": "filter", "how": "loop", "every": 1000, "when": "hostile=rare-ignore"}`)}),
	}})
	for i := range 50 {
		c.node(fmt.Sprintf("rare-%02d", i), nil)
	}
	var rare []string
	for _, name := range []string{"rare-fail", "rare-ignore"} {
		for i := range 25 {
			pod := fmt.Sprintf("%s-%02d", name, i)
			rare = append(rare, pod)
			c.pod(pod, label("hostile", name), func(p *v1.Pod) { p.Spec.SchedulerName = "hostile-rare" })
		}
	}
	for _, pod := range rare {
		c.waitBound(pod, 120*time.Second)
	}
	for _, name := range []string{"rare-fail", "rare-ignore"} {
		if v := metricValue(t, "wasmsched_policy_errors_total", map[string]string{"policy": name, "point": "filter", "kind": "timeout"}); v != 1 {
			t.Errorf("policy %s: %v Filter timeouts, want 1 (one call in 1000 of 1250)", name, v)
		}
		if v := metricValue(t, "wasmsched_policy_errors_total", map[string]string{"policy": name, "kind": "broken"}); v != 0 {
			t.Errorf("policy %s: %v calls reached a failed instance", name, v)
		}
	}
}

// checkFailure checks a failure case (hc.kind set) on its pods
// <name>-fail and <name>-ignore, each labelled for the probe of its name
// and failure policy: under Fail the pod is held with a condition naming
// the policy and the failure (or hc.verdict), under Ignore it is treated as
// if the policy were absent; the skip is an Event and a metric, and both
// failures are counted (the metrics are checked when the scheduler runs in
// this process).
func (c *cluster) checkFailure(t *testing.T, hc hostileCase) {
	t.Helper()
	fail, ignore := hc.name+"-fail", hc.name+"-ignore"
	switch {
	case hc.informational && hc.verdict == "":
		c.waitBound(fail, 60*time.Second)
	case hc.informational:
		c.waitCondition(t, fail, 60*time.Second, hc.verdict)
	default:
		want := []string{fail + ": policy failed (failurePolicy Fail): policy " + fail + "@", hc.failure}
		if hc.verdict != "" {
			want = append(want, hc.verdict)
		}
		c.waitCondition(t, fail, 60*time.Second, want...)
	}
	if hc.verdict == "" {
		c.waitBound(ignore, 60*time.Second)
	} else {
		c.waitCondition(t, ignore, 60*time.Second, hc.verdict)
	}
	// Ignore: the skip is an Event on the pod naming the policy and
	// the failure, and a metric.
	ev := c.waitEvent(t, ignore, "PolicySkipped", 60*time.Second)
	for _, want := range []string{ignore + ": policy failed and was skipped for this attempt (failurePolicy Ignore): policy " + ignore + "@", hc.failure} {
		if !strings.Contains(ev, want) {
			t.Errorf("PolicySkipped event %q lacks %q", ev, want)
		}
	}
	if c.sched == nil {
		return // a scheduler in a process of its own: its metrics are not this process's
	}
	for _, name := range []string{fail, ignore} {
		if v := metricValue(t, "wasmsched_policy_errors_total", map[string]string{"policy": name, "point": hc.point, "kind": hc.kind}); v < 1 {
			t.Errorf("wasmsched_policy_errors_total{policy=%q,point=%q,kind=%q} = %v, want at least 1", name, hc.point, hc.kind, v)
		}
	}
	if v := metricValue(t, "wasmsched_policy_skips_total", map[string]string{"policy": ignore, "point": hc.point, "kind": hc.kind}); v < 1 {
		t.Errorf("wasmsched_policy_skips_total{policy=%q,point=%q,kind=%q} = %v, want at least 1", ignore, hc.point, hc.kind, v)
	}
	if v := metricValue(t, "wasmsched_policy_skips_total", map[string]string{"policy": fail}); v != 0 {
		t.Errorf("policy %s (failurePolicy Fail) was skipped %v times", fail, v)
	}
}

// startHostileScheduler starts the in-process scheduler with one profile
// per entry of profiles (scheduler name -> WasmPolicy policy arguments).
func startHostileScheduler(t *testing.T, c *cluster, profiles map[string][]any) {
	t.Helper()
	var ps []any
	for name, policies := range profiles {
		ps = append(ps, map[string]any{
			"schedulerName": name,
			"plugins":       map[string]any{"multiPoint": map[string]any{"enabled": []any{map[string]any{"name": plugin.Name, "weight": 50}}}},
			"pluginConfig":  []any{map[string]any{"name": plugin.Name, "args": map[string]any{"namespace": policyNamespace, "policies": policies}}},
		})
	}
	b, err := yaml.Marshal(map[string]any{
		"apiVersion":       "kubescheduler.config.k8s.io/v1",
		"kind":             "KubeSchedulerConfiguration",
		"clientConnection": map[string]any{"kubeconfig": c.kubeconfig},
		"leaderElection":   map[string]any{"leaderElect": false},
		"profiles":         ps,
	})
	if err != nil {
		t.Fatal(err)
	}
	c.config = filepath.Join(t.TempDir(), "scheduler.yaml")
	if err := os.WriteFile(c.config, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := controlplane.StartScheduler(context.Background(), controlplane.SchedulerOptions{
		Kubeconfig:      c.kubeconfig,
		ConfigFile:      c.config,
		RegistryOptions: []app.Option{app.WithPlugin(plugin.Name, plugin.New)},
	})
	if err != nil {
		t.Fatalf("scheduler: %v", err)
	}
	c.sched = s
	t.Cleanup(s.Stop)
}

// waitCondition waits until pod's PodScheduled condition is False with a
// message holding every string of want, and returns the message. The
// condition is not cut to an Event's 1024 bytes.
func (c *cluster) waitCondition(t *testing.T, pod string, timeout time.Duration, want ...string) string {
	t.Helper()
	var last string
	err := testwasm.Poll(c.t, 100*time.Millisecond, timeout, func(ctx context.Context) (bool, error) {
		p, err := c.client.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Spec.NodeName != "" {
			return false, fmt.Errorf("pod %s was bound to %s", pod, p.Spec.NodeName)
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type != v1.PodScheduled || cond.Status != v1.ConditionFalse {
				continue
			}
			last = cond.Message
			for _, w := range want {
				if !strings.Contains(last, w) {
					return false, nil
				}
			}
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s: no PodScheduled=False condition holding %q within %v: %v; last message %q", pod, want, timeout, err, last)
	}
	return last
}

// waitEvent waits for an Event of reason on pod and returns its message.
func (c *cluster) waitEvent(t *testing.T, pod, reason string, timeout time.Duration) string {
	t.Helper()
	var msg string
	err := testwasm.Poll(c.t, 100*time.Millisecond, timeout, func(ctx context.Context) (bool, error) {
		evs, err := c.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod + ",reason=" + reason})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			msg = e.Message
		}
		return msg != "", nil
	})
	if err != nil {
		t.Fatalf("pod %s: no %s Event within %v: %v", pod, reason, timeout, err)
	}
	return msg
}

// waitRejected waits until the published status shows digest as the
// policy's last rejected upload and returns the error.
func (c *cluster) waitRejected(policyName, digest string, timeout time.Duration) string {
	c.t.Helper()
	var msg string
	last, ok := c.waitStatus(policyName, timeout, func(p lifecycle.SlotStatus) bool {
		if p.LastRejected != nil && p.LastRejected.Digest == digest {
			msg = p.LastRejected.Error
			return true
		}
		return false
	})
	if !ok {
		c.t.Fatalf("policy %s: upload %s not rejected within %v; status: %s", policyName, digest[:12], timeout, last)
	}
	return msg
}

// metricValue sums the wasmsched metric name over the series whose labels
// include want.
func metricValue(t *testing.T, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}
