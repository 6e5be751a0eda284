package plugin

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/policy"
)

// compareShadow runs the shadow policy beside an enforcing one on the same
// node and records where their Filter verdicts disagree. The shadow never
// affects placement: its errors and verdicts are only counted and logged.
func (pl *Plugin) compareShadow(ctx context.Context, st *cycleState, e *entry, ni fwk.NodeInfo, enforced policy.Status, enforcedErr error) {
	sh := e.shadow
	if !sh.version.Implements(abiv1.Point_POINT_FILTER) {
		return
	}
	if sh.version.Implements(abiv1.Point_POINT_PRE_FILTER) || sh.version.Info().WantsAllNodes {
		sh.preFilterOnce.Do(func() {
			res, err := sh.version.PreFilter(ctx, st.cycle)
			sh.shadowSkip = err == nil && res.Status.Code == abiv1.Code_CODE_SKIP
			if err == nil && !res.Status.IsSuccess() && !sh.shadowSkip {
				sh.shadowPre = &res.Status
			}
		})
	}
	var s policy.Status
	var err error
	switch {
	case sh.shadowSkip:
		s = policy.Status{Code: abiv1.Code_CODE_SUCCESS}
	case sh.shadowPre != nil:
		s = *sh.shadowPre
	default:
		s, err = timed(sh, abiv1.Point_POINT_FILTER, func() (policy.Status, error) { return sh.version.Filter(ctx, st.cycle, ni) })
	}
	labels := []string{e.slot.Args.Name, sh.slot.Args.Name, "filter"}
	shadowComparisons.WithLabelValues(labels...).Inc()
	a, b := verdict(enforced, enforcedErr), verdict(s, err)
	if passes(enforced, enforcedErr) == passes(s, err) {
		return
	}
	shadowDisagreements.WithLabelValues(labels...).Inc()
	klog.FromContext(ctx).WithName(Name).Info("Shadow policy disagrees", "policy", e.slot.Args.Name, "shadow", sh.slot.Args.Name,
		"pod", klog.KObj(st.cycle.Pod), "node", ni.Node().Name, "enforced", a, "shadowVerdict", b,
		"enforcedDigest", short(e.version.Digest()), "shadowDigest", short(sh.version.Digest()))
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
