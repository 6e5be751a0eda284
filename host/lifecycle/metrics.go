package lifecycle

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const subsystem = "wasmsched"

// The lifecycle's metrics: which version each policy serves, its reloads
// and loads, its instances and the time spent in its guest (collected at
// each scrape: instances.go, guestmetrics.go). The same names for every
// kind of policy.
var (
	activeVersion = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      subsystem,
		Name:           "policy_active_version",
		Help:           "1 for the module digest (sha256) each policy currently runs.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "digest"})
	reloadsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "policy_reloads_total",
		Help:           "Policy version changes by policy and result: success (swapped in), rejected (a revision was refused: fetch, load, limits or quarantine; the current version keeps serving), superseded (a newer version replaced it before it finished loading), deleted (a static policy's source disappeared).",
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

	registerOnce sync.Once
)

// RegisterMetrics registers the lifecycle's metrics with the legacy
// registry (what kube-scheduler serves on /metrics); Start calls it, and
// calling it again does nothing.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(activeVersion, reloadsTotal, reloadDuration, loadingSince, untrustedTotal)
		legacyregistry.CustomMustRegister(guestTime, instances)
	})
}
