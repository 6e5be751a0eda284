package compose

import (
	"sync"
	"sync/atomic"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/policy"
)

// Entry is one member in one cycle: the member and what it decided so far.
type Entry struct {
	Member

	// ignored: the policy failed with failurePolicy Ignore and is left out
	// for the rest of the cycle.
	ignored atomic.Bool
	// skipFilter: PreFilter answered Skip.
	skipFilter bool

	// filterOnce runs the cycle's Filter calls as one batch on the first
	// Filter (policy.FilterAll); verdicts holds them, nil if the batch did
	// not run or failed, in which case Filter calls the policy node by
	// node (and meets the failure there).
	filterOnce sync.Once
	verdicts   *policy.Verdicts
	// asked counts the Filter calls of the cycle; nodes is the size of the
	// snapshot when the first came.
	asked atomic.Int64
	nodes int

	// scoring: the policy scores in this cycle (set by PreScore).
	scoring bool
	// scores are the policy's scores of PreScore's nodes, in their order;
	// nil when it does not score in this cycle, or when the cycle rescores
	// (Cycle.Rescore) and the scheduler holds them.
	scores []int64
	// scored: PreScore computed every score in one batch (ScoreAll);
	// normalized: the guest normalised them in the same call.
	scored, normalized bool
}

// Ignored reports whether the policy failed with failurePolicy Ignore and
// is left out for the rest of the cycle.
func (e *Entry) Ignored() bool { return e.ignored.Load() }

// Asked is the number of Filter calls the cycle made for this policy, and
// the number of nodes of the snapshot (0 before the first Filter): how much
// of the snapshot the scheduler asked about.
func (e *Entry) Asked() (calls int64, nodes int) { return e.asked.Load(), e.nodes }

func (e *Entry) implements(pt abiv1.Point) bool {
	return !e.ignored.Load() && e.Version.Implements(pt)
}
