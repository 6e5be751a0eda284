package plugin

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
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
	for pt := abiv1.Point_POINT_PRE_FILTER; pt <= abiv1.Point_POINT_POST_BIND; pt++ {
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

// successer is implemented by results that carry a verdict.
type successer interface{ IsSuccess() bool }

// timed runs one policy call and records its count and latency.
func timed[T any](e *entry, pt abiv1.Point, call func() (T, error)) (T, error) {
	m := e.slot.metrics[pt]
	start := time.Now()
	v, err := call()
	m.duration.Observe(time.Since(start).Seconds())
	if err == nil {
		if vd, ok := any(v).(successer); ok && !vd.IsSuccess() {
			m.rejected.Inc()
		} else {
			m.success.Inc()
		}
	}
	return v, err
}

func typesUID(s string) types.UID { return types.UID(s) }
