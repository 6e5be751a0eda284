package e2e

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// The plugin registers with the framework only the events the policies
// serving at start-up declared (here: one node label), and covers what a
// later revision declares beyond them (pods leaving nodes) with its own
// informers. A pod the policy rejected is not retried when a pod leaves a
// node while the first revision serves, and is once the second does, though
// the framework was never told about pod deletions.
func TestEventsDeclaredLaterAreCovered(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	c := startCluster(t, nil)
	c.installCRD()
	c.node("n1", labels("closed", "yes"))
	digest := c.pushModule(testwasm.Bytes(t, "test/guests/probe"))
	spec := func(requeue map[string]any) map[string]any {
		return map[string]any{"module": map[string]any{"sha256": digest},
			"settings": map[string]any{"rejectLabel": "closed", "requeue": requeue}}
	}
	first := spec(map[string]any{"nodeLabelKeys": []any{"closed"}})
	c.applyPolicy("gate", first)
	restartScheduler(t, c, nil, selecting("1s", "gate"))
	c.waitPolicy("gate", "serving", 30*time.Second, servingKey(revisionKey(t, first), metav1.ConditionTrue))

	const profile = "default-scheduler"
	attempts := func() float64 {
		return metricValue(t, "scheduler_schedule_attempts_total", map[string]string{"profile": profile, "result": "unschedulable"})
	}
	covered := func() float64 {
		return metricValue(t, "wasmsched_requeued_pods_total", map[string]string{"profile": profile, "cause": "event"})
	}
	leave := func(name string) {
		t.Helper()
		c.pod(name, func(p *v1.Pod) { p.Spec.NodeName = "n1" })
		if err := c.client.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}

	c.pod("waiting")
	c.waitUnschedulable("waiting", 30*time.Second)
	testwasm.WaitFor(t, "the rejection counted", func() bool { return attempts() >= 1 })
	time.Sleep(2 * time.Second) // a retry the rejection itself may cause (none expected)
	before, coveredBefore := attempts(), covered()
	leave("first-leaves")
	time.Sleep(3 * time.Second)
	if got := attempts(); got != before {
		t.Fatalf("the waiting pod was retried %v times after a pod left a node; the serving revision declared only a node label", got-before)
	}

	second := spec(map[string]any{"nodeLabelKeys": []any{"closed"}, "podDeleted": map[string]any{}})
	c.applyPolicy("gate", second)
	c.waitPolicy("gate", "serving the second revision", 30*time.Second, servingKey(revisionKey(t, second), metav1.ConditionTrue))
	// The swap retries the pods the policy rejected: wait for that retry.
	testwasm.WaitFor(t, "the retry after the swap", func() bool { return attempts() > before })
	time.Sleep(2 * time.Second)
	before = attempts()
	leave("second-leaves")
	testwasm.WaitFor(t, "the waiting pod retried after a pod left a node", func() bool { return attempts() > before })
	if got := covered() - coveredBefore; got < 1 {
		t.Errorf("wasmsched_requeued_pods_total{cause=event} grew by %v; the retry should come from the plugin's own handlers", got)
	}
	c.stayUnbound("waiting", 0)
}
