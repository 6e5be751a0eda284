package plugin

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/compose"
	"github.com/wasmsched/wasmsched/host/engine"
)

// pointMetrics are a policy's metric handles for one extension point,
// resolved once so the per-node calls do not look labels up.
type pointMetrics struct {
	success, rejected, errors, skipped metrics.CounterMetric
	duration                           metrics.ObserverMetric
}

func newPointMetrics(policyName string) map[abiv1.Point]*pointMetrics {
	out := map[abiv1.Point]*pointMetrics{}
	// Every point the ABI defines: a call observed at a point without
	// handles would be a nil dereference in the scheduler.
	for v := range abiv1.Point_name {
		pt := abiv1.Point(v)
		if pt == abiv1.Point_POINT_UNSPECIFIED {
			continue
		}
		name := engine.PointName(pt)
		out[pt] = &pointMetrics{
			success:  callsTotal.WithLabelValues(policyName, name, "success"),
			rejected: callsTotal.WithLabelValues(policyName, name, "rejected"),
			errors:   callsTotal.WithLabelValues(policyName, name, "error"),
			skipped:  callsTotal.WithLabelValues(policyName, name, "skipped"),
			duration: callDuration.WithLabelValues(policyName, name),
		}
	}
	return out
}

// Called counts a policy's calls and their latency (compose.Observer).
func (s *policyRun) Called(c compose.Call) {
	m := s.metrics[c.Point]
	if c.Took > 0 {
		m.duration.Observe(c.Took.Seconds())
	}
	switch {
	case c.Err != nil:
		// Counted by Failed, with what the failure policy made of it.
	case c.Rejected():
		m.rejected.Add(float64(c.Calls))
	default:
		m.success.Add(float64(c.Calls))
	}
}

// Failed counts and logs a policy failure, and posts an Event on the pod
// when the failure policy leaves the policy out (compose.Observer).
func (s *policyRun) Failed(ctx context.Context, pod *v1.Pod, pt abiv1.Point, err *engine.CallError, o compose.Outcome) {
	name, point, kind := s.name(), engine.PointName(pt), string(err.Kind)
	errorsTotal.WithLabelValues(name, point, kind).Inc()
	msg := "Policy call failed"
	if o == compose.Retry {
		msg = "Batched " + point + " failed, calling the policy node by node"
	}
	klog.FromContext(ctx).Error(err, msg, "policy", name, "version", err.Version, "point", point, "kind", kind, "failurePolicy", s.slot.Args().FailurePolicy)
	m := s.metrics[pt]
	switch o {
	case compose.Fail:
		m.errors.Inc()
	case compose.Skip:
		m.skipped.Inc()
		skipsTotal.WithLabelValues(name, point, kind).Inc()
		if pod != nil && s.recorder != nil {
			note := fmt.Sprintf("%s: policy failed and was skipped for this attempt (failurePolicy Ignore): %v", name, err)
			if len(note) > maxEventNote { // what the API server accepts
				note = note[:maxEventNote-4] + " ..."
			}
			s.recorder.Eventf(pod, nil, v1.EventTypeWarning, "PolicySkipped", "Scheduling", "%s", note)
		}
	case compose.SkipAgain:
		m.skipped.Inc()
	}
}

// toStatus converts a composed verdict to the framework's.
func toStatus(s *compose.Status) *fwk.Status {
	if s == nil {
		return nil
	}
	switch s.Code {
	case abiv1.Code_CODE_SUCCESS:
		return nil
	case abiv1.Code_CODE_UNSCHEDULABLE:
		return fwk.NewStatus(fwk.Unschedulable, s.Reasons...)
	case abiv1.Code_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE:
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, s.Reasons...)
	case abiv1.Code_CODE_WAIT:
		return fwk.NewStatus(fwk.Wait, s.Reasons...)
	case abiv1.Code_CODE_SKIP:
		return fwk.NewStatus(fwk.Skip, s.Reasons...)
	case abiv1.Code_CODE_PENDING:
		return fwk.NewStatus(fwk.Pending, s.Reasons...)
	}
	return fwk.AsStatus(errors.New(s.Message()))
}
