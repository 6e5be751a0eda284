package guest_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/wasmsched/wasmsched/guest"
	"github.com/wasmsched/wasmsched/guest/guesttest"
)

// The declarations below are those of README.md's "Reading cluster
// objects" (TestREADMEClusterObjects checks it), so that the guide's code
// is compiled and run.

// elasticQuota is the kind of scheduler-plugins' ElasticQuota objects.
var elasticQuota = guest.Kind{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "elasticquotas"}

// overQuota rejects a pod whose namespace would request more than the max
// of its ElasticQuota: what its pods request now, plus the pod.
func overQuota(c *guest.Cycle) guest.Status {
	q := c.Object(elasticQuota, c.Pod.Namespace(), "quota")
	if q == nil {
		return guest.OK()
	}
	max := q.Get("spec", "max")
	used := c.TenantUsage("", c.Pod.Namespace())
	for _, name := range max.Keys() {
		limit, ok := max.Get(name).Quantity(name)
		if !ok {
			return guest.Errorf("quota %s/%s: max.%s is not a quantity", q.Namespace(), q.Name(), name)
		}
		if want := guest.Quantity(used, name) + c.Pod.Request(name); want > limit {
			return guest.Reject("namespace %s: %s %d over its max %d", c.Pod.Namespace(), name, want, limit)
		}
	}
	return guest.OK()
}

// Example_clusterObjects runs overQuota on a cluster made in a native
// test: one ElasticQuota, and seven CPUs used in the pod's namespace.
func Example_clusterObjects() {
	policy := &guest.Policy{Name: "quota", Context: []guest.Kind{elasticQuota}, NamespaceUsage: true, PreFilter: overQuota}
	cluster := guesttest.MakeCluster().Object(`
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: ElasticQuota
metadata: {name: quota, namespace: team-a}
spec:
  max: {cpu: "8", memory: 16Gi}
`).Usage("", "team-a", map[string]string{"cpu": "7", "memory": "4Gi"}, 3)
	for _, cpu := range []int64{500, 2000} {
		pod := guesttest.MakePod().Namespace("team-a").Name("p").Req(map[string]int64{"cpu": cpu}).Obj()
		s := policy.PreFilter(cluster.Cycle(pod, policy.Context))
		fmt.Println(cpu, s.Code, s.Reasons)
	}
	// Output:
	// 500 Success []
	// 2000 Unschedulable [namespace team-a: cpu 9000 over its max 8000]
}

func TestREADMEClusterObjects(t *testing.T) {
	readme := declarations(t, "README.md", append([]byte("package p\n"), readmeBlock(t, "Filter or PreFilter read them:")...))
	self, err := os.ReadFile("context_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	here := declarations(t, "context_example_test.go", self)
	if len(readme) != 1 || readme["overQuota"] == "" {
		t.Fatalf("README.md's block declares %d things, want overQuota", len(readme))
	}
	if readme["overQuota"] != here["overQuota"] {
		t.Errorf("overQuota differs between README.md and context_example_test.go:\n%s\n%s", readme["overQuota"], here["overQuota"])
	}
}
