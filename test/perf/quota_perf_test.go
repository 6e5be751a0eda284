package perf

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Quota workload's tenants: namespaces, each with a quota in the
// profile's settings (quotaSettings).
var (
	// quotaTenants are the tenants whose pods all fit their quota: the
	// first ten within their guaranteed share (min) at every size, the
	// others borrowing beyond it (their min is below what their initial
	// pods already request), which the cluster's unused guaranteed share
	// allows throughout.
	quotaTenants = tenantNames(19)
	// quotaOverTenant starts at its max (overInitPods pods of 100m CPU
	// fill its 1200m): each of its measured pods exceeds the max and stays
	// pending under the quota rules.
	quotaOverTenant = "tenant-over"
)

// quotaOverPlaced is the number of the over tenant's pods that fit: its
// initial pods (the workloads' overInitPods).
const quotaOverPlaced = 12

func tenantNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("tenant-%02d", i)
	}
	return out
}

// quotaSettings are the quota rules' settings in the Quota workload, for
// the native twin (its plugin args) and the wasm policy alike (JSON, one
// line: it is spliced into YAML). Weights go from 1 to 4.
var quotaSettings = func() string {
	var qs []string
	for i, t := range quotaTenants {
		min, max := `{"cpu": "1000", "memory": "5Ti"}`, `{"cpu": "2000", "memory": "10Ti"}`
		if i >= 10 {
			min = `{"cpu": "5", "memory": "25Gi"}`
		}
		qs = append(qs, fmt.Sprintf(`%q: {"min": %s, "max": %s, "weight": %d}`, t, min, max, i%4+1))
	}
	qs = append(qs, fmt.Sprintf(`%q: {"min": {"cpu": "1"}, "max": {"cpu": "1200m"}}`, quotaOverTenant))
	return `{"elasticQuotas": false, "quotas": {` + strings.Join(qs, ", ") + `}}`
}()

// checkQuota fails a Quota workload whose over tenant got more pods placed
// than its max allows, under a profile running the quota rules. Under the
// default profile all of them are placed: it knows no quota.
func checkQuota(tCtx tContext, name string) {
	if strings.Contains(name, "/Quota_default") {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods, err := tCtx.Client().CoreV1().Pods(quotaOverTenant).List(ctx, metav1.ListOptions{})
	if err != nil {
		tCtx.Errorf("list the over tenant's pods: %v", err)
		return
	}
	placed := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			placed++
		}
	}
	if placed != quotaOverPlaced || len(pods.Items) <= placed {
		tCtx.Errorf("tenant %s: %d of %d pods placed, want %d placed and the rest pending over its max", quotaOverTenant, placed, len(pods.Items), quotaOverPlaced)
	}
}
