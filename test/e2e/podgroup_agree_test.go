//go:build !k8s1.35

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/host/scenario"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// TestSmokePodGroupAgreesWithEval: eval's group cycle and a real scheduler
// with the same policies (gpu and topology) place the pod groups of
// examples/topology's scenarios in the same domain, or leave them both
// pending. The nodes a member lands on within the domain may differ: the
// scheduler's own plugins (NodeResourcesFit) score nodes too.
func TestSmokePodGroupAgreesWithEval(t *testing.T) {
	f, err := scenario.ReadFile("../../examples/topology/scenarios/topology.yaml")
	if err != nil {
		t.Fatal(err)
	}
	runner := &scenario.Runner{Modules: map[string]string{
		"gpu": testwasm.Path(t, "examples/gpu"), "topology": testwasm.Path(t, "examples/topology")}}
	c := startGroupCluster(t, true,
		policy{Name: "gpu", Package: "examples/gpu"}, policy{Name: "topology", Package: "examples/topology"})
	ctx := context.Background()
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodesCreated := false
	// The scenarios whose policies and cluster are the file's own: the
	// tightest domain, and no domain fits.
	for _, s := range f.Scenarios[:2] {
		res := runner.Run(ctx, s)
		if !res.Passed() || res.Group == nil {
			t.Fatalf("scenario %q: %+v", s.Name, res.Mismatches)
		}
		if !nodesCreated {
			for _, n := range s.Group.Nodes {
				n = n.DeepCopy()
				if _, err := c.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			nodesCreated = true
		}
		pg := s.Group.PodGroup
		c.createPodGroup(pg.GetNamespace(), pg.GetName(), int(pg.GetMinCount()), strings.Join(pg.GetTopologyKeys(), ""))
		for _, m := range s.Group.Members {
			m = m.DeepCopy()
			m.UID = ""
			if _, err := c.client.CoreV1().Pods(m.Namespace).Create(ctx, m, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		want := strings.TrimPrefix(res.Group.Selected, "nvidia.com/gpu.clique=")
		if want == "" {
			// eval leaves the group pending: the scheduler says why.
			msg := c.waitUnschedulableIn(s.Group.Members[0].Namespace, s.Group.Members[0].Name)
			if reason := res.Group.Reasons[0]; !strings.Contains(msg, reason) {
				t.Errorf("scenario %q: scheduler's reason %q, eval's %q", s.Name, msg, reason)
			}
			continue
		}
		for _, m := range s.Group.Members {
			node := c.waitBoundIn(m.Namespace, m.Name)
			n, err := c.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := n.Labels["nvidia.com/gpu.clique"]; got != want {
				t.Errorf("scenario %q: %s placed in clique %s, eval chose %s", s.Name, m.Name, got, want)
			}
		}
	}
}

// waitUnschedulableIn waits for a FailedScheduling event of a pod of
// namespace and returns its message.
func (c *cluster) waitUnschedulableIn(namespace, name string) string {
	c.t.Helper()
	var msg string
	err := testwasm.Poll(c.t, 100*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, error) {
		evs, err := c.client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=FailedScheduling"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			msg = e.Message
		}
		return msg != "", nil
	})
	if err != nil {
		c.t.Fatalf("no FailedScheduling event for pod %s/%s: %v", namespace, name, err)
	}
	return msg
}
