package plugin

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host/compose"
	"github.com/wasmsched/wasmsched/host/lifecycle"
	"github.com/wasmsched/wasmsched/host/policy"
)

// stateKey is where a cycle's state lives in CycleState.
const stateKey fwk.StateKey = Name

// cycleState is what a scheduling cycle pins: the composition of the policy
// versions current when it started, and what each decided along the way.
// Binding reads the same state, so a pod is judged by one version of each
// policy throughout.
type cycleState struct {
	c *compose.Cycle
	// reserved is a private copy of the chosen node taken at Reserve, for
	// the binding phase, which must not read the scheduler's snapshot (the
	// next cycle rewrites it in place).
	reserved fwk.NodeInfo
	// reasons bounds the Filter reasons of the cycle (see MaxPodReasons),
	// shared by clones on purpose.
	reasons *reasonBudget
	// blocked: required policies that cannot serve (roster.blocked).
	blocked []lifecycle.Blocker
	// changes are the pods AddPod and RemovePod (PreFilterExtensions) added
	// to and removed from the node of a simulation, in order: a Filter with
	// changes is a Filter under changes (compose.FilterChanged). Only the
	// clones of the cycle's state the framework takes for simulations
	// have any.
	changes []policy.PodChange
	// rejected is the attempt's rejection record, shared by clones.
	rejected *rejection
	// clone: the state is a clone the framework took. The scheduler scores
	// on a clone only to rescore a batch's candidates (score.go).
	clone bool
}

// Clone implements fwk.StateData. The composition is shared by clones (it
// is safe for the concurrent Filter calls preemption's clones make), as is
// the reason budget; the change list is the clone's own, since each
// simulation changes its own copy of a node.
func (s *cycleState) Clone() fwk.StateData {
	c := *s
	c.changes = slices.Clip(s.changes)
	c.clone = true
	return &c
}

// withChange records a pod added to or removed from the simulation's node.
// The framework calls the PreFilter extensions of one clone from one
// goroutine at a time.
func (s *cycleState) withChange(removed bool, pi fwk.PodInfo) {
	s.changes = append(s.changes, policy.PodChange{Removed: removed, Pod: pi})
}

// newCycle pins the current version of every enforcing policy (a slot with
// none, deactivated, is left out) and of the shadows beside them.
func (pl *Plugin) newCycle(pod *v1.Pod, nodes []fwk.NodeInfo) *cycleState {
	r := pl.currentRoster()
	members := make([]compose.Member, 0, len(r.runs))
	blocked := r.blocked
	for _, run := range r.runs {
		s := run.slot
		if s.Args().Mode == lifecycle.ModeShadow {
			continue
		}
		v := s.Current()
		if v == nil {
			if s.BlocksWithoutVersion() {
				blocked = append(blocked[:len(blocked):len(blocked)], lifecycle.Blocker{Name: s.Name(), Reason: s.NoVersionReason()})
			}
			continue
		}
		m := run.member(v)
		if sh := r.shadows[run]; sh != nil {
			if sv := sh.slot.Current(); sv != nil {
				run := &shadowRun{enforcing: m, shadow: sh, version: sv}
				m.AfterFilter, m.AfterScore, m.AfterPermit = run.compareFilter, run.compareScores, run.comparePermit
			}
		}
		members = append(members, m)
	}
	c := compose.NewCycle(pod, nodes, members)
	c.Names = &pl.nodeNames
	return &cycleState{c: c, reasons: &reasonBudget{}, blocked: blocked}
}

func getState(cs fwk.CycleState) (*cycleState, error) {
	d, err := cs.Read(stateKey)
	if err != nil {
		return nil, fmt.Errorf("%s: no cycle state (PreFilter did not run): %w", Name, err)
	}
	return d.(*cycleState), nil
}
