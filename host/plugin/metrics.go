package plugin

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
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
	activeVersion = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      subsystem,
		Name:           "policy_active_version",
		Help:           "1 for the module digest (sha256) each policy currently runs.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "digest"})
	// wasmsched_policy_instances is read at each scrape: instances.go.

	reloadsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "policy_reloads_total",
		Help:           "Policy version changes by policy and result: success (swapped in), rejected (the upload was refused, the current version keeps serving), superseded (a newer version replaced it before it finished loading), deleted (the source disappeared).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "result"})
	reloadDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      subsystem,
		Name:           "policy_reload_duration_seconds",
		Help:           "Time to validate and swap in a new policy version, from its bytes to serving.",
		Buckets:        metrics.ExponentialBuckets(0.005, 2, 12),
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy"})
	loadingSince = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      subsystem,
		Name:           "policy_loading_since_seconds",
		Help:           "Unix time at which the source handed over the version each policy is loading now, 0 when none loads: time() minus it is how long the load has taken so far.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy"})
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
		Help:           "Pods the plugin moved back to the active queue itself, by profile and cause: swap (a policy that rejected them changed), objects (a cluster object their rejecting policy reads changed) or usage (a pod stopped counting in the tenant usage their rejecting policy reads). Cluster events go through queueing hints and the scheduler's own queue metrics.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "cause"})

	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(callsTotal, errorsTotal, skipsTotal, callDuration, activeVersion,
			reloadsTotal, reloadDuration, loadingSince, shadowDisagreements, shadowComparisons, requeuedPods)
		legacyregistry.CustomMustRegister(guestTime, instances)
	})
}
