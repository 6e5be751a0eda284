package plugin

import (
	"context"
	"time"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"

	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/compose"
	"github.com/wasmsched/wasmsched/host/policy"
)

// comparePermit asks the shadow's Permit about the pod on the node the
// enforcing policy's Permit was asked about, with the same waiting pods (a
// compose.Member's AfterPermit), and records whether the two answer the
// same class of verdict: allow, wait, reject or error.
//
// The shadow's answer is for comparison only: its Wait parks nothing (no
// timeout, no wait set), its verdicts on waiting pods are dropped, so a
// shadow gang never allows or rejects a member, and its failure is
// counted and logged, never the pod's.
func (r *shadowRun) comparePermit(ctx context.Context, c *compose.Cycle, ni fwk.NodeInfo, waiting []*abiv1.WaitingPod, enforced policy.PermitResult, enforcedErr error) {
	sh := r.version
	if !sh.Implements(abiv1.Point_POINT_PERMIT) {
		return
	}
	start := time.Now()
	res, err := sh.Permit(ctx, c.Policy, ni, waiting)
	r.shadow.Called(compose.Call{Point: abiv1.Point_POINT_PERMIT, Took: time.Since(start), Calls: 1, Status: res.Status, Err: err})
	if err != nil && ctx.Err() != nil {
		return // the scheduler abandoned the cycle: nothing to compare
	}
	if err == nil {
		err = r.guestError(abiv1.Point_POINT_PERMIT, res.Status)
	}
	if err != nil {
		r.failed(ctx, c.Pod(), abiv1.Point_POINT_PERMIT, err)
	}
	labels := r.labels("permit")
	shadowComparisons.WithLabelValues(labels...).Inc()
	a, b := permitClass(enforced.Status, enforcedErr), permitClass(res.Status, err)
	if a == b {
		return
	}
	shadowDisagreements.WithLabelValues(labels...).Inc()
	klog.FromContext(ctx).WithName(Name).Info("Shadow policy disagrees", "policy", r.enforcing.Name, "shadow", r.shadow.name(),
		"pod", klog.KObj(c.Pod()), "point", "permit", "node", ni.Node().Name,
		"enforced", a, "shadowVerdict", b, "enforcedStatus", verdict(enforced.Status, enforcedErr), "shadowStatus", verdict(res.Status, err),
		"enforcedDigest", api.ShortDigest(r.enforcing.Version.Digest()), "shadowDigest", api.ShortDigest(sh.Digest()))
}

// permitClass is the class of a Permit answer that the comparison goes by.
func permitClass(s policy.Status, err error) string {
	switch {
	case err != nil || s.Code == abiv1.Code_CODE_ERROR:
		return "error"
	case s.Code == abiv1.Code_CODE_SUCCESS:
		return "allow"
	case s.Code == abiv1.Code_CODE_WAIT:
		return "wait"
	}
	return "reject"
}
