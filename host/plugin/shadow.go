package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/compose"
	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/policy"
)

// shadowRun is a shadow policy beside an enforcing one in one cycle. It
// compares the shadow's Filter (this file), Score (shadow_score.go) and
// Permit (shadow_permit.go) with the enforcing policy's through the hooks of
// the enforcing compose.Member, and never affects placement: the shadow's
// verdicts, scores and failures are only counted and logged. Its Filter
// comparison is safe for concurrent use; Score and Permit are compared from
// the one goroutine that runs those points.
type shadowRun struct {
	enforcing compose.Member
	shadow    *policyRun
	version   *policy.Policy
	// The shadow's PreFilter, run once per cycle: skip when it answered
	// Skip, pre when it rejected the pod.
	preFilterOnce sync.Once
	skip          bool
	pre           *policy.Status
}

// compareFilter runs the shadow policy beside the enforcing one on the same
// node and records where their Filter verdicts disagree (a compose.Member's
// AfterFilter). The shadow never affects placement: its errors and verdicts
// are only counted and logged.
func (r *shadowRun) compareFilter(ctx context.Context, c *compose.Cycle, ni fwk.NodeInfo, enforced policy.Status, enforcedErr error) {
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
		r.shadow.Called(compose.Call{Point: abiv1.Point_POINT_FILTER, Took: time.Since(start), Calls: 1, Status: s, Err: err})
		if err == nil {
			err = r.guestError(abiv1.Point_POINT_FILTER, s)
		}
		if err != nil {
			if ctx.Err() != nil {
				return // the scheduler stopped filtering: nothing to compare
			}
			r.failed(ctx, c.Pod(), abiv1.Point_POINT_FILTER, err)
		}
	}
	labels := r.labels("filter")
	shadowComparisons.WithLabelValues(labels...).Inc()
	a, b := verdict(enforced, enforcedErr), verdict(s, err)
	if passes(enforced, enforcedErr) == passes(s, err) {
		return
	}
	shadowDisagreements.WithLabelValues(labels...).Inc()
	klog.FromContext(ctx).WithName(Name).Info("Shadow policy disagrees", "policy", r.enforcing.Name, "shadow", r.shadow.name(),
		"pod", klog.KObj(c.Pod()), "point", "filter", "node", ni.Node().Name, "enforced", a, "shadowVerdict", b,
		"enforcedDigest", api.ShortDigest(r.enforcing.Version.Digest()), "shadowDigest", api.ShortDigest(sh.Digest()))
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

// labels are the shadow metrics' labels of a comparison at point.
func (r *shadowRun) labels(point string) []string {
	return []string{r.enforcing.Name, r.shadow.name(), point}
}

// failed counts and logs a failure of the shadow's call at pt (a trap, a
// timeout, an invalid answer, its own Error verdict). The shadow has no
// failure policy: the failure never reaches the pod, and the shadow is not
// left out of the cycle.
func (r *shadowRun) failed(ctx context.Context, pod *v1.Pod, pt abiv1.Point, err error) {
	var ce *engine.CallError
	if !errors.As(err, &ce) {
		ce = r.version.CallError(engine.PointName(pt), engine.KindHost, err)
	}
	name, point, kind := r.shadow.name(), engine.PointName(pt), string(ce.Kind)
	errorsTotal.WithLabelValues(name, point, kind).Inc()
	r.shadow.metrics[pt].errors.Inc()
	klog.FromContext(ctx).WithName(Name).Error(ce, "Shadow policy failed", "policy", r.enforcing.Name, "shadow", name,
		"pod", klog.KObj(pod), "point", point, "kind", kind, "shadowDigest", api.ShortDigest(r.version.Digest()))
}

// guestError is the shadow's own Error verdict at pt as a failure, nil for
// any other verdict.
func (r *shadowRun) guestError(pt abiv1.Point, s policy.Status) error {
	if s.Code != abiv1.Code_CODE_ERROR {
		return nil
	}
	return r.version.CallError(engine.PointName(pt), engine.KindGuest,
		fmt.Errorf("policy reported an error: %s", strings.Join(s.Reasons, "; ")))
}
