package plugin

import (
	"sync/atomic"

	"k8s.io/client-go/tools/events"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/compose"
	"github.com/wasmsched/wasmsched/host/lifecycle"
	"github.com/wasmsched/wasmsched/host/policy"
)

// policyRun is a policy of the roster as the adapter runs it: its slot
// (the version serving, its arguments in force) and what the adapter keeps
// of it from cycle to cycle: metric handles, the share of the snapshot its
// Filter is asked about. One exists per slot while the slot is in the
// roster. Its methods are safe for concurrent use.
type policyRun struct {
	slot     *lifecycle.Slot
	metrics  map[abiv1.Point]*pointMetrics
	recorder events.EventRecorder

	// lastFilter is the entry of the last cycle that ran this policy's
	// Filter; share averages how much of the snapshot recent cycles asked
	// about. See batchFilters.
	lastFilter atomic.Pointer[compose.Entry]
	share      filterShare
}

func (r *policyRun) name() string { return r.slot.Name() }

// roster is the lifecycle's roster (src) with each slot's policyRun. It is
// never changed once stored.
type roster struct {
	src     *lifecycle.Roster
	runs    []*policyRun
	shadows map[*policyRun]*policyRun
	blocked []lifecycle.Blocker
}

// noPolicies is the roster of a plugin without a lifecycle.
var noPolicies = lifecycle.NewRoster(nil, nil)

// lcRoster is the lifecycle's roster now.
func (pl *Plugin) lcRoster() *lifecycle.Roster {
	if pl.rosters == nil {
		return noPolicies
	}
	return pl.rosters()
}

// currentRoster returns the view of the lifecycle's current roster, made
// the first time a cycle asks after it changed.
func (pl *Plugin) currentRoster() *roster {
	src := pl.lcRoster()
	if v := pl.view.Load(); v != nil && v.src == src {
		return v
	}
	pl.runsMu.Lock()
	defer pl.runsMu.Unlock()
	if v := pl.view.Load(); v != nil && v.src == src {
		return v
	}
	v := &roster{src: src, shadows: map[*policyRun]*policyRun{}, blocked: src.Blocked}
	in := map[*lifecycle.Slot]*policyRun{}
	for _, s := range src.Slots {
		r := pl.runs[s]
		if r == nil {
			r = &policyRun{slot: s, metrics: newPointMetrics(s.Name()), recorder: pl.eventRecorder()}
		}
		in[s] = r
		v.runs = append(v.runs, r)
	}
	for e, sh := range src.Shadows {
		v.shadows[in[e]] = in[sh]
	}
	pl.runs = in
	pl.view.Store(v)
	return v
}

// version returns the current version of the policy called name in the
// roster, or nil when it has none or is not in it.
func (r *roster) version(name string) *policy.Policy {
	if s := r.src.Slot(name); s != nil {
		return s.Current()
	}
	return nil
}

// member is the policy in a cycle's composition, at version v.
func (r *policyRun) member(v *policy.Policy) compose.Member {
	a := r.slot.Args()
	return compose.Member{
		Name:        r.name(),
		Version:     v,
		Weight:      a.Weight,
		Ignore:      a.FailurePolicy == lifecycle.FailurePolicyIgnore,
		Observer:    r,
		BatchFilter: r.batchFilters,
	}
}

// batchFilters decides whether e's cycle, over nodes snapshot nodes,
// filters with this policy in one batch: while the scheduler asks about at
// least half of the nodes (averaged over recent cycles). A batch judges
// every node, one call costing less than half of a call made alone (no
// waiting for an instance); when other plugins reject most nodes before
// this one (NodeResourcesFit rejects the nodes without GPUs for a GPU pod)
// or the scheduler stops early, node by node is cheaper. It runs once per
// filtering cycle, and cycles run one at a time.
func (r *policyRun) batchFilters(e *compose.Entry, nodes int) bool {
	prev := r.lastFilter.Swap(e)
	if prev == nil {
		return r.share.next(0, 0)
	}
	return r.share.next(prev.Asked())
}

// filterShare is 1 + the share of the snapshot (thousandths) the scheduler
// asked Filter about, averaged over recent cycles; 0 before the first.
type filterShare struct{ v atomic.Int64 }

// next folds the previous filtering cycle (asked Filter calls over nodes
// snapshot nodes; nodes 0 for none) into the average and reports whether
// the next cycle should batch: while the average is at least one half, or
// nothing is known yet.
func (f *filterShare) next(asked int64, nodes int) bool {
	share := f.v.Load() - 1
	if nodes > 0 {
		sample := min(1000, asked*1000/int64(nodes))
		if share < 0 {
			share = sample
		} else {
			share = (3*share + sample) / 4
		}
		f.v.Store(share + 1)
	}
	return share < 0 || share >= 500
}

// eventRecorder is the profile's recorder, nil without a handle.
func (pl *Plugin) eventRecorder() events.EventRecorder {
	if pl.handle == nil {
		return nil
	}
	return pl.handle.EventRecorder()
}
