package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/lifecycle"
	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// staticState reads a static policy's state from lifecycle.StateConfigMap
// (profile default-scheduler), the zero state when there is none yet.
func (c *cluster) staticState(name string) api.SchedulingPolicyStatus {
	c.t.Helper()
	var st api.SchedulingPolicyStatus
	cm, err := c.client.CoreV1().ConfigMaps(policyNamespace).Get(context.Background(), lifecycle.StateConfigMap, metav1.GetOptions{})
	if err != nil {
		return st
	}
	if raw, ok := cm.Data["default-scheduler."+name+".json"]; ok {
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			c.t.Fatalf("%s: %v", lifecycle.StateConfigMap, err)
		}
	}
	return st
}

// waitStatic waits until a static policy's state satisfies done.
func (c *cluster) waitStatic(name, what string, done func(api.SchedulingPolicyStatus) bool) api.SchedulingPolicyStatus {
	c.t.Helper()
	var st api.SchedulingPolicyStatus
	testwasm.WaitFor(c.t, "static policy "+name+" "+what, func() bool { st = c.staticState(name); return done(st) })
	return st
}

// chunkEvents returns the notes of the Events with reason on a ConfigMap.
func (c *cluster) chunkEvents(configMap, reason string) []string {
	c.t.Helper()
	evs, err := c.client.EventsV1().Events(policyNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		if e.Regarding.Kind == "ConfigMap" && e.Regarding.Name == configMap && e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}

// TestStaticPolicyRestarts is TestSchedulingPolicyRestarts for a
// statically configured policy whose module is uploaded as ConfigMaps
// (`wasmsched push --configmaps`): the scheduler (a subprocess) is killed
// and restarted with a broken upload in the ConfigMaps, with a new module
// still on probation, and with the ConfigMaps deleted and its module cache
// gone (a new pod). It comes back serving the last good revision from its
// module cache, quarantines the module it died with, and with nothing to
// load refuses pods with the reason instead of crash-looping; every pod
// is bound exactly once.
func TestStaticPolicyRestarts(t *testing.T) {
	c := startCluster(t, nil)
	c.namespace(policyNamespace)
	for _, n := range []string{"n1", "n2", "n3"} {
		c.node(n, nil)
	}
	module := testwasm.Bytes(t, "examples/nodepin")
	// The same rules, other bytes: a module never served before.
	fresh := append(append([]byte(nil), module...), 0, 6, 5, 'f', 'r', 'e', 's', 'h')
	precompile(t, module, fresh)
	c.upload("pin", module)
	config := schedulerConfig(t, t.TempDir(), c.kubeconfig, []policy{{Name: "pin", ConfigMap: "pin", Settings: `{"nodes": ["n1", "n2"]}`}},
		func(cfg map[string]any) {
			prof := cfg["profiles"].([]any)[0].(map[string]any)
			prof["pluginConfig"].([]any)[0].(map[string]any)["args"].(map[string]any)["probation"] = "10s"
		})
	// start returns once kube-scheduler logs that it starts scheduling,
	// which it does after the plugin's start-up: a fallback to the last
	// good revision is loaded by then, and its time is the
	// restart-to-serving time.
	start := func(name string) *replica {
		t.Helper()
		began := time.Now()
		r := startReplica(t, name, config)
		waitFor(t, name+" scheduling", 60*time.Second, func() bool { r.running(); return strings.Contains(r.out.String(), "Starting Kubernetes Scheduler") })
		t.Logf("%s: started in %v", name, time.Since(began))
		return r
	}
	serving := func(key string) func(api.SchedulingPolicyStatus) bool {
		return func(st api.SchedulingPolicyStatus) bool {
			return len(st.Replicas) == 1 && st.Replicas[0].Key == key
		}
	}
	r := start("first")
	st := c.waitStatic("pin", "proven", func(st api.SchedulingPolicyStatus) bool { return st.LastGood != nil })
	goodKey := st.LastGood.Key
	if st.LastGood.Module.SHA256 != source.Digest(module) {
		t.Fatalf("last good %+v, want the uploaded module", st.LastGood)
	}
	stop := c.streamPods(300 * time.Millisecond)

	// 1. A broken upload: the running scheduler refuses it, keeps serving,
	// and after a restart serves the last good revision from its module
	// cache (the ConfigMaps no longer hold it).
	c.upload("pin", []byte("\x00asm\x01\x00\x00\x00 not a policy"))
	c.waitStatic("pin", "refusing the broken upload", func(st api.SchedulingPolicyStatus) bool {
		return stateCondition(st, api.ConditionRejected).Reason == api.ReasonLoadFailed
	})
	r.kill()
	r = start("after-junk")
	st = c.waitStatic("pin", "serving the last good revision", func(st api.SchedulingPolicyStatus) bool {
		return serving(goodKey)(st) && stateCondition(st, api.ConditionReady).Reason == api.ReasonServingLastGood
	})
	if m := stateCondition(st, api.ConditionRejected).Message; !strings.Contains(m, "not a valid WebAssembly module") {
		t.Errorf("Rejected message %q does not say why the upload was refused", m)
	}
	c.pod("probe-1")
	if n := c.waitBound("probe-1", 60*time.Second); n == "n3" {
		t.Errorf("probe-1 on n3: the policy does not serve")
	}

	// 2. A good new module starts serving; the scheduler dies within its
	// probation. At the next start it is quarantined and the last good
	// revision serves.
	c.upload("pin", fresh)
	st = c.waitStatic("pin", "serving the new module on probation", func(st api.SchedulingPolicyStatus) bool {
		rs := st.Replicas
		return len(rs) == 1 && rs[0].Probation != nil && rs[0].Probation.Key == rs[0].Key && rs[0].SHA256 == source.Digest(fresh)
	})
	freshKey := st.Replicas[0].Key
	r.kill()
	r = start("after-probation-death")
	st = c.waitStatic("pin", "quarantining the new module", func(st api.SchedulingPolicyStatus) bool {
		return serving(goodKey)(st) && stateCondition(st, api.ConditionReady).Reason == api.ReasonQuarantined && len(st.Quarantined) == 1
	})
	if q := st.Quarantined[0]; q.Key != freshKey || !strings.Contains(q.Reason, "within the probation") {
		t.Errorf("quarantined %+v, want %s with the reason", q, freshKey)
	}
	waitFor(t, "a PolicyQuarantined Event on pin-0", 30*time.Second, func() bool {
		ev := c.chunkEvents("pin-0", lifecycle.EventQuarantined)
		return len(ev) > 0 && strings.Contains(ev[0], "last good revision")
	})
	c.pod("probe-2")
	if n := c.waitBound("probe-2", 60*time.Second); n == "n3" {
		t.Errorf("probe-2 on n3")
	}

	// 3. The ConfigMaps are deleted: the running scheduler keeps what it
	// has (onDelete Keep). Restarted as a new pod would be, without its
	// module cache, it has nothing to load: pods wait with the reason, and
	// the scheduler runs. Uploading again brings the policy back.
	if err := c.client.CoreV1().ConfigMaps(policyNamespace).DeleteCollection(context.Background(), metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: source.LabelPolicy + "=pin"}); err != nil {
		t.Fatal(err)
	}
	c.pod("probe-3")
	if n := c.waitBound("probe-3", 60*time.Second); n == "n3" {
		t.Errorf("probe-3 on n3")
	}
	r.kill()
	cached := filepath.Join(os.Getenv("WASMSCHED_CACHE_DIR"), "modules", source.Digest(module)+".wasm")
	if err := os.Remove(cached); err != nil {
		t.Fatalf("the last good module is not in the module cache: %v", err)
	}
	r = start("after-configmaps-deleted")
	c.pod("probe-4")
	if msg := c.waitUnschedulable("probe-4", 60*time.Second); !strings.Contains(msg, "policy pin cannot serve") || !strings.Contains(msg, "configMap pin does not exist") {
		t.Errorf("probe-4: %q, want the policy and its missing ConfigMaps named", msg)
	}
	r.running()
	c.upload("pin", module)
	c.waitStatic("pin", "serving again", func(st api.SchedulingPolicyStatus) bool {
		return serving(goodKey)(st) && stateCondition(st, api.ConditionReady).Reason == api.ReasonServing
	})

	n := stop()
	t.Logf("%d pods streamed", n)
	c.podsBoundOnce(n + 4)
	r.running()
	r.kill()
	r.checkRaces()
}

// stateCondition is the condition t of a policy's state.
func stateCondition(st api.SchedulingPolicyStatus, t string) metav1.Condition {
	return condition(&api.SchedulingPolicy{Status: st}, t)
}
