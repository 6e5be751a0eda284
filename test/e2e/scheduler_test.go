package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Pods land where the policy says, and a pod no node accepts stays Pending
// with the policy's reason in its FailedScheduling event.
func TestPlacementAndRejectionReasons(t *testing.T) {
	c := startCluster(t, []policy{{Name: "nodepin", Package: "examples/nodepin", Settings: `{"nodes": ["k8s-node2"]}`}})
	for _, n := range []string{"k8s-node1", "k8s-node2", "k8s-node3"} {
		c.node(n, nil)
	}
	for _, p := range []string{"a", "b", "c"} {
		c.pod(p)
	}
	for _, p := range []string{"a", "b", "c"} {
		if node := c.waitBound(p, 30*time.Second); node != "k8s-node2" {
			t.Fatalf("pod %s on %s, want k8s-node2", p, node)
		}
	}

	c2 := startClusterSecond(t, c, []policy{{Name: "nodepin", Package: "examples/nodepin", Settings: `{"nodes": ["elsewhere"]}`}})
	c2.pod("nowhere")
	msg := c2.waitUnschedulable("nowhere", 30*time.Second)
	for _, want := range []string{"0/3 nodes are available", "3 nodepin: node is not one of the allowed nodes [elsewhere]"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("FailedScheduling message %q lacks %q", msg, want)
		}
	}
	// The plugin's metrics are on the scheduler's registry.
	assertMetric(t, `wasmsched_policy_calls_total{point="filter",policy="nodepin",result="rejected"}`)
	assertMetric(t, `wasmsched_policy_active_version{digest=`)
	// Time inside the module, per export, for the version running now.
	assertMetric(t, `wasmsched_policy_guest_calls_total{export="filter",policy="nodepin",version=`)
	assertMetric(t, `wasmsched_policy_guest_seconds_total{export="cycle",policy="nodepin",version=`)
}

// startClusterSecond restarts the scheduler of c with other policies.
func startClusterSecond(t *testing.T, c *cluster, policies []policy) *cluster {
	t.Helper()
	c.sched.Stop()
	c2 := &cluster{t: t, cp: c.cp, client: c.client, kubeconfig: c.kubeconfig}
	restartScheduler(t, c2, policies)
	return c2
}

func assertMetric(t *testing.T, prefix string) {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "wasmsched_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := mf.GetName() + "{"
			for i, lp := range m.GetLabel() {
				if i > 0 {
					l += ","
				}
				l += lp.GetName() + "=\"" + lp.GetValue() + "\""
			}
			l += "}"
			if strings.HasPrefix(l, prefix) {
				return
			}
			lines = append(lines, l)
		}
	}
	t.Fatalf("no metric %s among:\n%s", prefix, strings.Join(lines, "\n"))
}

// Filter composes (a node must pass every policy) and weights change which
// node scores best.
func TestCompositionAndWeights(t *testing.T) {
	for _, tc := range []struct {
		name           string
		weightA, weigh int
		want           string
	}{
		{"b weighs more", 1, 3, "y"},
		{"a weighs more", 3, 1, "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, []policy{
				{Name: "a", Package: "test/guests/probe", Settings: `{"rejectLabel": "no-a", "scoreLabel": "a"}`, Weight: tc.weightA},
				{Name: "b", Package: "test/guests/probe", Settings: `{"rejectLabel": "no-b", "scoreLabel": "b"}`, Weight: tc.weigh},
			})
			c.node("x", labels("a", "100", "b", "0"))
			c.node("y", labels("a", "0", "b", "100"))
			c.node("rejected-by-a", labels("a", "100", "b", "100", "no-a", ""))
			c.node("rejected-by-b", labels("a", "100", "b", "100", "no-b", ""))
			for _, p := range []string{"p1", "p2", "p3"} {
				c.pod(p)
			}
			for _, p := range []string{"p1", "p2", "p3"} {
				if node := c.waitBound(p, 30*time.Second); node != tc.want {
					t.Fatalf("pod %s on %s, want %s", p, node, tc.want)
				}
			}
		})
	}
}

// Permit parks a pod until its gang is complete, then allows all members;
// a lone member is rejected when its wait times out.
func TestPermitWaitsThenAllowsOrRejects(t *testing.T) {
	c := startCluster(t, []policy{{Name: "gangish", Package: "test/guests/probe", Settings: `{"permit": "gang", "gangSize": 2}`}})
	c.node("n1", nil)
	c.pod("first")
	c.stayUnbound("first", 2*time.Second)
	c.pod("second")
	c.waitBound("first", 30*time.Second)
	c.waitBound("second", 30*time.Second)

	c2 := startClusterSecond(t, c, []policy{{Name: "waiter", Package: "test/guests/probe", Settings: `{"permit": "wait"}`}})
	c2.pod("lonely")
	c2.stayUnbound("lonely", time.Second)
	msg := c2.waitUnschedulable("lonely", 30*time.Second)
	if !strings.Contains(msg, "timeout") {
		t.Fatalf("FailedScheduling message %q does not mention the Permit timeout", msg)
	}
}

// A failing policy blocks scheduling with failurePolicy Fail (the pod stays
// Pending with the error as its reason) and is skipped with Ignore.
func TestFailurePolicy(t *testing.T) {
	broken := `{"at": "filter", "how": "panic"}`
	c := startCluster(t, []policy{{Name: "broken", Package: "test/guests/probe", Settings: broken, FailurePolicy: "Ignore"}})
	c.node("n1", nil)
	c.pod("ignored")
	if node := c.waitBound("ignored", 30*time.Second); node != "n1" {
		t.Fatalf("bound to %s", node)
	}
	assertMetric(t, `wasmsched_policy_calls_total{point="filter",policy="broken",result="skipped"}`)
	assertMetric(t, `wasmsched_policy_errors_total{kind="trap",point="filter",policy="broken"}`)

	c2 := startClusterSecond(t, c, []policy{{Name: "broken", Package: "test/guests/probe", Settings: broken, FailurePolicy: "Fail"}})
	c2.pod("failed")
	msg := c2.waitUnschedulable("failed", 30*time.Second)
	for _, want := range []string{"broken: policy failed (failurePolicy Fail)", "panic: probe: deliberate panic in filter"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("FailedScheduling message %q lacks %q", msg, want)
		}
	}
}

// When the scheduler has found enough feasible nodes it cancels the Filter
// calls still in flight. A call waiting for the policy's only instance then
// ends, and must not fail the cycle of a pod that has its nodes: every pod
// binds, with no FailedScheduling event naming the policy or the
// cancellation.
func TestFilterStoppedEarly(t *testing.T) {
	const nodes = 300
	var names []string
	for i := range nodes {
		names = append(names, fmt.Sprintf("node-%03d", i))
	}
	allowed, err := json.Marshal(map[string]any{"nodes": names})
	if err != nil {
		t.Fatal(err)
	}
	// With 10% of 300 nodes to find, the scheduler stops at its minimum of
	// 100 feasible nodes; the policy is asked about a third of the snapshot
	// and filters node by node, 16 goroutines queueing for one instance.
	c := startCluster(t, []policy{{Name: "nodepin", Package: "examples/nodepin", Settings: string(allowed), MaxInstances: 1}},
		func(cfg map[string]any) { cfg["percentageOfNodesToScore"] = 10 })
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < nodes; i += 8 {
				c.node(names[i], nil)
			}
		}()
	}
	wg.Wait()
	const pods = 40
	for i := range pods {
		c.pod(fmt.Sprintf("early-%02d", i))
	}
	for i := range pods {
		c.waitBound(fmt.Sprintf("early-%02d", i), 60*time.Second)
	}
	evs, err := c.client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		// A scheduler that has not seen the nodes yet may report none;
		// only the policy's own failures count here.
		if strings.Contains(e.Message, "WasmPolicy") || strings.Contains(e.Message, "nodepin") || strings.Contains(e.Message, "canceled") {
			t.Errorf("pod %s: FailedScheduling: %s", e.InvolvedObject.Name, e.Message)
		}
	}
}
