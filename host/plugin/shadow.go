package plugin

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/compose"
	"github.com/wasmsched/wasmsched/host/policy"
)

// shadowRun is a shadow policy beside an enforcing one in one cycle.
type shadowRun struct {
	enforcing compose.Member
	slot      *Slot
	version   *policy.Policy
	// The shadow's PreFilter, run once per cycle: skip when it answered
	// Skip, pre when it rejected the pod.
	preFilterOnce sync.Once
	skip          bool
	pre           *policy.Status
}

// compare runs the shadow policy beside the enforcing one on the same node
// and records where their Filter verdicts disagree (a compose.Member's
// AfterFilter). The shadow never affects placement: its errors and verdicts
// are only counted and logged.
func (r *shadowRun) compare(ctx context.Context, c *compose.Cycle, ni fwk.NodeInfo, enforced policy.Status, enforcedErr error) {
	sh := r.version
	if !sh.Implements(abiv1.Point_POINT_FILTER) {
		return
	}
	if sh.Implements(abiv1.Point_POINT_PRE_FILTER) || sh.Info().WantsAllNodes {
		r.preFilterOnce.Do(func() {
			res, err := sh.PreFilter(ctx, c.Policy)
			r.skip = err == nil && res.Status.Code == abiv1.Code_CODE_SKIP
			if err == nil && !res.Status.IsSuccess() && !r.skip {
				r.pre = &res.Status
			}
		})
	}
	var s policy.Status
	var err error
	switch {
	case r.skip:
		s = policy.Status{Code: abiv1.Code_CODE_SUCCESS}
	case r.pre != nil:
		s = *r.pre
	default:
		start := time.Now()
		s, err = sh.Filter(ctx, c.Policy, ni)
		r.slot.Called(compose.Call{Point: abiv1.Point_POINT_FILTER, Took: time.Since(start), Calls: 1, Status: s, Err: err})
	}
	labels := []string{r.enforcing.Name, r.slot.Args.Name, "filter"}
	shadowComparisons.WithLabelValues(labels...).Inc()
	a, b := verdict(enforced, enforcedErr), verdict(s, err)
	if passes(enforced, enforcedErr) == passes(s, err) {
		return
	}
	shadowDisagreements.WithLabelValues(labels...).Inc()
	klog.FromContext(ctx).WithName(Name).Info("Shadow policy disagrees", "policy", r.enforcing.Name, "shadow", r.slot.Args.Name,
		"pod", klog.KObj(c.Pod()), "node", ni.Node().Name, "enforced", a, "shadowVerdict", b,
		"enforcedDigest", short(r.enforcing.Version.Digest()), "shadowDigest", short(sh.Digest()))
}

func passes(s policy.Status, err error) bool { return err == nil && s.IsSuccess() }

func verdict(s policy.Status, err error) string {
	if err != nil {
		return "Error: " + err.Error()
	}
	if len(s.Reasons) == 0 {
		return policy.CodeName(s.Code)
	}
	return fmt.Sprintf("%s: %s", policy.CodeName(s.Code), strings.Join(s.Reasons, "; "))
}
