package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/host/lifecycle"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/wasmsched/wasmsched/host/plugin"
	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// upload writes a module as the ConfigMaps of policy, creating or updating
// them, and returns its digest.
func (c *cluster) upload(policy string, module []byte) string {
	c.t.Helper()
	cms, err := source.Pack(policy, policyNamespace, module)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx := context.Background()
	for _, cm := range cms {
		api := c.client.CoreV1().ConfigMaps(policyNamespace)
		_, err := api.Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			_, err = api.Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err != nil {
			c.t.Fatalf("upload %s: %v", cm.Name, err)
		}
	}
	return source.Digest(module)
}

// corrupt overwrites chunk 0's payload with garbage, keeping its
// annotations, as a damaged upload would.
func (c *cluster) corrupt(policy string) {
	c.t.Helper()
	api := c.client.CoreV1().ConfigMaps(policyNamespace)
	cm, err := api.Get(context.Background(), source.ChunkName(policy, 0), metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	cm.BinaryData[source.DataKey] = []byte("this is not a gzip stream")
	if _, err := api.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) namespace(name string) {
	c.t.Helper()
	_, err := c.client.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		c.t.Fatal(err)
	}
}

// waitRejections waits for at least n PolicyRejected events in namespace.
func (c *cluster) waitRejections(namespace string, n int, timeout time.Duration) {
	c.t.Helper()
	err := testwasm.Poll(c.t, 100*time.Millisecond, timeout, func(ctx context.Context) (bool, error) {
		evs, err := c.client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=PolicyRejected"})
		if err != nil {
			return false, err
		}
		count := 0
		for _, e := range evs.Items {
			count += max(1, int(e.Count))
			if e.Series != nil {
				count += int(e.Series.Count) - 1
			}
		}
		return count >= n, nil
	})
	if err != nil {
		c.t.Fatalf("fewer than %d PolicyRejected events within %v", n, timeout)
	}
}

// waitActive waits until the published status shows digest for policy.
func (c *cluster) waitActive(policy, digest string, timeout time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	if last, ok := c.waitStatus(policy, timeout, func(p lifecycle.SlotStatus) bool { return p.Digest == digest }); !ok {
		c.t.Fatalf("policy %s not serving %s within %v; status: %s", policy, digest[:12], timeout, last)
	}
	return time.Since(start)
}

// waitStatus polls the published status until an entry of policy satisfies
// done; it fails the test at once when one of c.live has exited. It
// returns the last status seen that names the policy, and whether done
// was met before timeout.
func (c *cluster) waitStatus(policy string, timeout time.Duration, done func(lifecycle.SlotStatus) bool) (string, bool) {
	c.t.Helper()
	var last string
	err := testwasm.Poll(c.t, 20*time.Millisecond, timeout, func(ctx context.Context) (bool, error) {
		c.liveRunning()
		cm, err := c.client.CoreV1().ConfigMaps(policyNamespace).Get(ctx, lifecycle.StatusConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, raw := range cm.Data {
			var st lifecycle.Status
			if json.Unmarshal([]byte(raw), &st) != nil {
				continue
			}
			for _, p := range st.Policies {
				if p.Policy == policy {
					last = raw
					if done(p) {
						return true, nil
					}
				}
			}
		}
		return false, nil
	})
	return last, err == nil
}

// While pods are created continuously, the policy is replaced ten times
// (alternating two versions with different placements) and two corrupt
// uploads are attempted: every pod is bound exactly once to a node one of
// the versions allows, the corrupt uploads are rejected with Events, and
// the last good version keeps serving.
func TestHotReloadUnderLoad(t *testing.T) {
	testwasm.Claim(t)
	a, b := testwasm.Bytes(t, "test/guests/versions/a"), testwasm.Bytes(t, "test/guests/versions/b")
	c := startCluster(t, nil)
	c.namespace(policyNamespace)
	digestA := c.upload("placer", a)
	for _, v := range []string{"a", "b"} {
		n := c.node("node-"+v, labels("wasmsched-test/version", v))
		n.Status.Allocatable[v1.ResourcePods] = resource.MustParse("1000")
		n.Status.Allocatable[v1.ResourceCPU] = resource.MustParse("200") // 500 pods of 100m
		if _, err := c.client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	restartScheduler(t, c, []policy{{Name: "placer", ConfigMap: "placer"}})
	c.waitActive("placer", digestA, 30*time.Second)

	const pods = 500
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < pods; i++ {
			c.pod(fmt.Sprintf("p-%03d", i))
			time.Sleep(20 * time.Millisecond)
		}
	}()
	digestB := source.Digest(b)
	var latencies []time.Duration
	for i := 0; i < 10; i++ {
		time.Sleep(700 * time.Millisecond)
		module, digest := b, digestB
		if i%2 == 1 {
			module, digest = a, digestA
		}
		if i == 3 || i == 7 {
			// A damaged upload: rejected (once it has stayed damaged for
			// the source's settle time) with an Event, while the current
			// version keeps serving.
			c.corrupt("placer")
			c.waitRejections(policyNamespace, i/4+1, 30*time.Second)
		}
		c.upload("placer", module)
		latencies = append(latencies, c.waitActive("placer", digest, 30*time.Second))
	}
	wg.Wait()
	t.Logf("ConfigMap write to serving: %v", latencies)

	// Every pod bound, to a node one version allows.
	perNode := map[string]int{}
	err := testwasm.Poll(t, 200*time.Millisecond, 120*time.Second, func(ctx context.Context) (bool, error) {
		list, err := c.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		perNode = map[string]int{}
		for _, p := range list.Items {
			perNode[p.Spec.NodeName]++
		}
		return len(list.Items) == pods && perNode[""] == 0, nil
	})
	if err != nil {
		t.Fatalf("not every pod bound: %v", perNode)
	}
	if perNode["node-a"] == 0 || perNode["node-b"] == 0 || perNode["node-a"]+perNode["node-b"] != pods {
		t.Fatalf("placements %v: want pods judged by both versions, on their nodes only", perNode)
	}
	// The corrupt uploads were rejected with Events on the ConfigMap.
	evs, err := c.client.CoreV1().Events(policyNamespace).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=PolicyRejected"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) == 0 {
		all, _ := c.client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		var seen []string
		for _, e := range all.Items {
			seen = append(seen, e.Namespace+"/"+e.InvolvedObject.Name+" "+e.Reason+": "+e.Message)
		}
		assertMetric(t, `wasmsched_policy_reloads_total{policy="placer",result="rejected"}`)
		t.Fatalf("no PolicyRejected event for the corrupt uploads; events:\n%s", strings.Join(seen, "\n"))
	}
	if msg := evs.Items[0].Message; !strings.Contains(msg, "upload rejected") || !strings.Contains(msg, "keeps serving") {
		t.Fatalf("event message %q", msg)
	}
	assertMetric(t, `wasmsched_policy_reloads_total{policy="placer",result="rejected"}`)
	assertMetric(t, `wasmsched_policy_reloads_total{policy="placer",result="success"}`)
}

// A shadow version runs beside the enforcing one without changing where
// pods go; the verdicts where they disagree are counted. Filter: canary
// passes only node-b, where placer passes node-a and node-a2. Score and
// Permit: ranker prefers node-a and allows; its shadow prefers node-a2 and
// answers Wait, which would park every pod past its 3s timeout (and so
// never bind it) if the shadow's verdict were applied.
func TestShadowMode(t *testing.T) {
	c := startCluster(t, []policy{
		{Name: "placer", Package: "test/guests/versions/a"},
		{Name: "canary", Package: "test/guests/versions/b", Mode: "Shadow", Shadows: "placer"},
		{Name: "ranker", Package: "test/guests/probe", Settings: `{"scoreLabel": "rank", "normalize": true}`},
		{Name: "ranker-canary", Package: "test/guests/probe", Settings: `{"scoreLabel": "contrary", "normalize": true, "permit": "wait"}`,
			Mode: "Shadow", Shadows: "ranker"},
	})
	c.node("node-a", labels("wasmsched-test/version", "a", "rank", "10", "contrary", "1"))
	c.node("node-a2", labels("wasmsched-test/version", "a", "rank", "1", "contrary", "10"))
	c.node("node-b", labels("wasmsched-test/version", "b", "rank", "5", "contrary", "5"))
	pods := []string{"s1", "s2", "s3"}
	for _, p := range pods {
		c.pod(p)
	}
	for _, p := range pods {
		if n := c.waitBound(p, 30*time.Second); n != "node-a" {
			t.Fatalf("%s on %s: the shadow version changed placement", p, n)
		}
	}
	assertMetric(t, `wasmsched_shadow_disagreements_total{point="filter",policy="placer",shadow="canary"}`)
	assertMetric(t, `wasmsched_shadow_comparisons_total{point="filter",policy="placer",shadow="canary"}`)
	// Every cycle that got to Permit compared its scores and its Permit
	// once, and disagreed both times; their Filter verdicts all agreed.
	for _, point := range []string{"filter", "score", "permit"} {
		want := map[string]string{"policy": "ranker", "shadow": "ranker-canary", "point": point}
		compared := metricValue(t, "wasmsched_shadow_comparisons_total", want)
		disagreed := metricValue(t, "wasmsched_shadow_disagreements_total", want)
		switch {
		case compared < float64(len(pods)):
			t.Errorf("%s: %g comparisons, want at least one per pod (%d)", point, compared, len(pods))
		case point == "filter" && disagreed != 0:
			t.Errorf("filter: %g disagreements of %g, want none", disagreed, compared)
		case point != "filter" && disagreed != compared:
			t.Errorf("%s: %g disagreements of %g comparisons, want every one", point, disagreed, compared)
		}
	}
}

// A version slow to load does not hold up the next one. The probe, with
// these settings, spins in its settings hook until the 10s init deadline
// stops it, so on its own it would be rejected 10s after it began loading.
// While it spins, the published status shows it initialising; a good
// version uploaded then serves well before that deadline, and the probe is
// reported superseded: never serving, never rejected.
func TestReloadSupersedesSlowLoad(t *testing.T) {
	testwasm.Claim(t)
	a, b := testwasm.Bytes(t, "test/guests/versions/a"), testwasm.Bytes(t, "test/guests/versions/b")
	slow := testwasm.Bytes(t, "test/guests/probe")
	c := startCluster(t, nil)
	c.namespace(policyNamespace)
	digestA := c.upload("slowload", a)
	restartScheduler(t, c, []policy{{Name: "slowload", ConfigMap: "slowload", Settings: `{"at": "settings", "how": "loop"}`}})
	c.waitActive("slowload", digestA, 30*time.Second)

	digestSlow := c.upload("slowload", slow)
	var loading lifecycle.Pending
	if last, ok := c.waitStatus("slowload", 60*time.Second, func(p lifecycle.SlotStatus) bool {
		if p.Loading != nil && p.Loading.Digest == digestSlow && p.Loading.Stage == "initialising" {
			loading = *p.Loading
			return true
		}
		return false
	}); !ok {
		t.Fatalf("the status never showed %s initialising; last: %s", digestSlow[:12], last)
	}
	digestB := c.upload("slowload", b)
	slowServed := false
	last, ok := c.waitStatus("slowload", 60*time.Second, func(p lifecycle.SlotStatus) bool {
		slowServed = slowServed || p.Digest == digestSlow
		return p.Digest == digestB
	})
	if !ok || slowServed {
		t.Fatalf("b not serving, or the slow version served first (%v); last status: %s", slowServed, last)
	}
	// Both times are the scheduler's: the slow load could not end before
	// loading.Since + 10s, and b served no later than the report saying so.
	var report lifecycle.Status
	if err := json.Unmarshal([]byte(last), &report); err != nil {
		t.Fatal(err)
	}
	if d := report.Updated.Sub(loading.Since); d >= 10*time.Second {
		t.Fatalf("b reported serving %v after the slow version arrived: it waited for the slow load", d)
	}
	t.Logf("b reported serving %v after the slow version arrived (which could not end before 10s)", report.Updated.Sub(loading.Since))

	// Once the slow load's deadline has passed, b still serves and the
	// slow version is superseded, not rejected.
	time.Sleep(time.Until(loading.Since.Add(11 * time.Second)))
	last, ok = c.waitStatus("slowload", 10*time.Second, func(p lifecycle.SlotStatus) bool {
		return p.Loading == nil && p.LastSuperseded != nil && p.LastSuperseded.Digest == digestSlow
	})
	if !ok {
		t.Fatalf("the slow version not reported superseded; status: %s", last)
	}
	if err := json.Unmarshal([]byte(last), &report); err != nil {
		t.Fatal(err)
	}
	for _, p := range report.Policies {
		if p.Policy == "slowload" && (p.Digest != digestB || p.LastRejected != nil || p.LastSuperseded.By != digestB || p.LastSuperseded.Stage != "initialising") {
			t.Fatalf("status %s: want b serving, the slow version superseded by b while initialising, nothing rejected", last)
		}
	}
	if v := metricValue(t, "wasmsched_policy_reloads_total", map[string]string{"policy": "slowload", "result": "superseded"}); v != 1 {
		t.Errorf("wasmsched_policy_reloads_total{policy=slowload,result=superseded} = %v, want 1", v)
	}
	if v := metricValue(t, "wasmsched_policy_reloads_total", map[string]string{"policy": "slowload", "result": "rejected"}); v != 0 {
		t.Errorf("wasmsched_policy_reloads_total{policy=slowload,result=rejected} = %v, want 0", v)
	}
}

// A policy whose first version cannot load no longer stops the scheduler
// from starting (it would crash-loop): the scheduler starts, the policy has
// no version, and the profile's pods are refused with the policy, the
// version and the reason, which a PolicyRejected Event on the ConfigMap
// repeats. With the loader between the source and the load, start-up
// still waits for that outcome.
func TestBadFirstVersionHoldsPods(t *testing.T) {
	c := startCluster(t, nil)
	c.namespace(policyNamespace)
	bad, err := os.ReadFile(filepath.Join(testwasm.Root(t), "host", "engine", "testdata", "abi_v2.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	digest := c.upload("badstart", bad)
	s, err := controlplane.StartScheduler(context.Background(), controlplane.SchedulerOptions{
		Kubeconfig:      c.kubeconfig,
		ConfigFile:      schedulerConfig(t, t.TempDir(), c.kubeconfig, []policy{{Name: "badstart", ConfigMap: "badstart"}}),
		RegistryOptions: []app.Option{app.WithPlugin(plugin.Name, plugin.New)},
	})
	if err != nil {
		t.Fatalf("start-up: %v (a policy that cannot load must not stop the scheduler)", err)
	}
	t.Cleanup(s.Stop)
	c.node("n1", nil)
	c.pod("held")
	want := "policy badstart@" + digest[:12] + ": abi_version: module speaks ABI version 2"
	if msg := c.waitUnschedulable("held", 60*time.Second); !strings.Contains(msg, "policy badstart cannot serve") || !strings.Contains(msg, want) {
		t.Fatalf("pod held: %q, want the policy and %q", msg, want)
	}
	waitFor(t, "a PolicyRejected Event on badstart-0", 30*time.Second, func() bool {
		ev := c.chunkEvents("badstart-0", lifecycle.EventRejected)
		return len(ev) > 0 && strings.Contains(ev[0], want)
	})
}
