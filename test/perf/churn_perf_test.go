package perf

import (
	"context"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Churn workload's namespaces. Its churning pods go to two namespaces
// in turn: each round creates pods in one and deletes the pods the round
// before created in the other, which have had a round's time to be bound,
// so that most deletions are deletions of pods on nodes.
var churnNamespaces = []string{"churn-a", "churn-b"}

// churnPending is the namespace of the pods the gpu rules keep pending: they
// want an H100, and the workload's nodes have A100s and time-sliced T4s.
const churnPending = "pending"

// churnRound is one round of the Churn workload: the namespace its churning
// pods go to and the one it empties ("" in the first round).
type churnRound struct{ Create, Delete string }

func churnRounds(n int) []churnRound {
	rs := make([]churnRound, n)
	for i := range rs {
		rs[i].Create = churnNamespaces[i%2]
		if i > 0 {
			rs[i].Delete = churnNamespaces[(i+1)%2]
		}
	}
	return rs
}

// checkChurn fails a Churn workload whose pending pods got placed under a
// profile running the gpu rules: no node has the H100 they want. Under the
// default profile they are placed: it knows no such rule.
func checkChurn(tCtx tContext, name string) {
	if strings.Contains(name, "/Churn_default") {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods, err := tCtx.Client().CoreV1().Pods(churnPending).List(ctx, metav1.ListOptions{})
	if err != nil {
		tCtx.Errorf("list the pending pods: %v", err)
		return
	}
	placed := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			placed++
		}
	}
	if placed > 0 || len(pods.Items) == 0 {
		tCtx.Errorf("%d of %d H100 pods placed, want all pending: no node has an H100", placed, len(pods.Items))
	}
}
