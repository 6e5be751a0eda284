package lifecycle

import (
	"sync"

	"k8s.io/component-base/metrics"

	"github.com/wasmsched/wasmsched/host/policy"
)

// instancesCollector publishes wasmsched_policy_instances at each scrape:
// the WebAssembly instances that exist now for each policy, counted by the
// policies themselves (policy.Policy.Instances), over the version each
// slot runs and the versions being retired, which keep theirs until their
// last call has returned. A configured policy with no version (deactivated)
// reports 0. Two profiles running a policy of the same name report one
// sum. It is safe for concurrent use.
type instancesCollector struct {
	metrics.BaseStableCollector

	mu       sync.Mutex
	retiring map[*policy.Policy]string // version being retired -> policy name
}

var (
	instancesDesc = metrics.NewDesc("wasmsched_policy_instances",
		"Live WebAssembly instances per policy: those of the version it runs and of replaced versions not closed yet.",
		[]string{"policy"}, nil, metrics.ALPHA, "")

	instances = &instancesCollector{retiring: map[*policy.Policy]string{}}
)

// retire counts the instances of p, a replaced version of policy name,
// until done is called.
func (c *instancesCollector) retire(name string, p *policy.Policy) (done func()) {
	c.mu.Lock()
	c.retiring[p] = name
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.retiring, p)
		c.mu.Unlock()
	}
}

// DescribeWithStability implements metrics.StableCollector.
func (c *instancesCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- instancesDesc
}

// CollectWithStability implements metrics.StableCollector.
func (c *instancesCollector) CollectWithStability(ch chan<- metrics.Metric) {
	counts := map[string]int{}
	guestTime.forEach(func(s *Slot) {
		n := 0
		if p := s.Current(); p != nil {
			n = p.Instances()
		}
		counts[s.Name()] += n
	})
	c.mu.Lock()
	for p, name := range c.retiring {
		counts[name] += p.Instances()
	}
	c.mu.Unlock()
	for name, n := range counts {
		ch <- metrics.NewLazyConstMetric(instancesDesc, metrics.GaugeValue, float64(n), name)
	}
}
