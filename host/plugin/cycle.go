package plugin

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host/compose"
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
	// reasons bounds the Filter reasons of the cycle (see MaxPodReasons).
	reasons reasonBudget
	// blocked: required policies that cannot serve (roster.blocked).
	blocked []blocker
}

// Clone implements fwk.StateData. The state is shared by clones: the
// composition is safe for the concurrent Filter calls preemption's clones
// make, and the reason budget is shared on purpose.
func (s *cycleState) Clone() fwk.StateData { return s }

// newCycle pins the current version of every enforcing policy (a slot with
// none, deactivated, is left out) and of the shadows beside them.
func (pl *Plugin) newCycle(pod *v1.Pod, nodes []fwk.NodeInfo) *cycleState {
	r := pl.currentRoster()
	members := make([]compose.Member, 0, len(r.slots))
	blocked := r.blocked
	for _, s := range r.slots {
		a := s.args()
		if a.Mode == ModeShadow {
			continue
		}
		v := s.Current()
		if v == nil {
			if s.required && a.FailurePolicy == FailurePolicyFail {
				blocked = append(blocked[:len(blocked):len(blocked)], blocker{name: a.Name, reason: s.noVersionReason()})
			}
			continue
		}
		m := s.member(v)
		if sh := r.shadows[s]; sh != nil {
			if sv := sh.Current(); sv != nil {
				run := &shadowRun{enforcing: m, slot: sh, version: sv}
				m.AfterFilter, m.AfterScore, m.AfterPermit = run.compareFilter, run.compareScores, run.comparePermit
			}
		}
		members = append(members, m)
	}
	return &cycleState{c: compose.NewCycle(pod, nodes, members), blocked: blocked}
}

func getState(cs fwk.CycleState) (*cycleState, error) {
	d, err := cs.Read(stateKey)
	if err != nil {
		return nil, fmt.Errorf("%s: no cycle state (PreFilter did not run): %w", Name, err)
	}
	return d.(*cycleState), nil
}
