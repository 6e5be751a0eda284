package lifecycle

import (
	"sync"

	"k8s.io/component-base/metrics"
)

// guestTime publishes, at each scrape, the time each running policy
// version spent in each of its module's exports and the calls made to
// them. The counts live in the engine (package engine, Module.GuestTime);
// a version's series start at its load and end when it is retired, as a
// counter per version must.
type guestTimeCollector struct {
	metrics.BaseStableCollector

	mu    sync.Mutex
	slots map[*Slot]struct{}
}

var (
	guestSecondsDesc = metrics.NewDesc("wasmsched_policy_guest_seconds_total",
		"Wall time spent inside a policy version's WebAssembly exports (sync, cycle, filter, score_nodes, ...), over all its instances.",
		[]string{"policy", "version", "export"}, nil, metrics.ALPHA, "")
	guestCallsDesc = metrics.NewDesc("wasmsched_policy_guest_calls_total",
		"Calls into a policy version's WebAssembly exports, over all its instances.",
		[]string{"policy", "version", "export"}, nil, metrics.ALPHA, "")

	guestTime = &guestTimeCollector{slots: map[*Slot]struct{}{}}
)

func (c *guestTimeCollector) add(s *Slot) {
	c.mu.Lock()
	c.slots[s] = struct{}{}
	c.mu.Unlock()
}

func (c *guestTimeCollector) remove(s *Slot) {
	c.mu.Lock()
	delete(c.slots, s)
	c.mu.Unlock()
}

// forEach calls fn on every slot added and not removed (the slots of the
// running plugins), holding the collector's lock: fn must not call add or
// remove. The instances collector reads the slots this way too.
func (c *guestTimeCollector) forEach(fn func(*Slot)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for s := range c.slots {
		fn(s)
	}
}

// DescribeWithStability implements metrics.StableCollector.
func (c *guestTimeCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- guestSecondsDesc
	ch <- guestCallsDesc
}

// CollectWithStability implements metrics.StableCollector. Two profiles
// running the same version of a policy report one sum.
func (c *guestTimeCollector) CollectWithStability(ch chan<- metrics.Metric) {
	type key struct{ policy, version, export string }
	type sum struct {
		seconds float64
		calls   int64
	}
	sums := map[key]sum{}
	var order []key
	c.forEach(func(s *Slot) {
		p := s.Current()
		if p == nil {
			return
		}
		for _, g := range p.Stats().Guest {
			k := key{s.Name(), p.Version(), g.Export}
			v, seen := sums[k]
			if !seen {
				order = append(order, k)
			}
			sums[k] = sum{v.seconds + g.Time.Seconds(), v.calls + g.Calls}
		}
	})
	for _, k := range order {
		v := sums[k]
		ch <- metrics.NewLazyConstMetric(guestSecondsDesc, metrics.CounterValue, v.seconds, k.policy, k.version, k.export)
		ch <- metrics.NewLazyConstMetric(guestCallsDesc, metrics.CounterValue, float64(v.calls), k.policy, k.version, k.export)
	}
}
