package plugin

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/wasmsched/wasmsched/host/lifecycle"
)

const subsystem = "wasmsched"

var (
	callsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "policy_calls_total",
		Help:           "Calls into WASM policies, by policy, extension point and result (success, rejected, error, skipped).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "point", "result"})
	errorsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "policy_errors_total",
		Help:           "Failed calls into WASM policies, by policy, extension point and kind (trap, timeout, memory, invalid, ...).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "point", "kind"})
	skipsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "policy_skips_total",
		Help:           "Times a failing policy with failurePolicy Ignore was skipped for the rest of a pod's scheduling cycle, by policy, extension point and kind of failure (trap, timeout, memory, invalid, guest, ...).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "point", "kind"})
	callDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      subsystem,
		Name:           "policy_call_duration_seconds",
		Help:           "Latency of calls into WASM policies, by policy and extension point (Filter and Score per node).",
		Buckets:        metrics.ExponentialBuckets(0.000001, 4, 12),
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "point"})
	shadowDisagreements = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "shadow_disagreements_total",
		Help:           "Comparisons where a shadow policy disagreed with the enforcing policy it runs beside, by point: filter (a node's verdict), score (a cycle's best node), permit (the verdict class: allow, wait, reject, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "shadow", "point"})
	shadowComparisons = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "shadow_comparisons_total",
		Help:           "Comparisons between a shadow policy and its enforcing policy, by point: filter (per node), score (per cycle), permit (per Permit call).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "shadow", "point"})
	requeuedPods = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "requeued_pods_total",
		Help:           "Pods the plugin moved back to the active queue itself, by profile and cause: swap (a policy that rejected them changed), objects (a cluster object their rejecting policy reads changed) usage (a pod stopped counting in the tenant usage their rejecting policy reads) or event (a node or pod event that a version declared after the profile was built, which the scheduler does not watch). Other cluster events go through queueing hints and the scheduler's own queue metrics.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "cause"})

	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(callsTotal, errorsTotal, skipsTotal, callDuration, shadowDisagreements, shadowComparisons, requeuedPods)
		lifecycle.RegisterMetrics()
	})
}
