// Package compose decides one pod's scheduling cycle from several policies,
// the way the WasmPolicy plugin presents them to the scheduler as one
// plugin: a node passes Filter only if every policy passes it, in order;
// the score is the weighted mean of each policy's normalised scores; Permit
// allows only if every policy allows; and each policy's failure policy
// applies to its failures, a guest's own Error verdicts included.
//
// It owns composition and failure handling and nothing else. It knows
// policies (host/policy) and node infos, never the scheduler framework's
// CycleState, Status or Handle: host/plugin adapts it to the framework and
// host/eval drives it offline in the scheduler's order, so `wasmsched eval`
// decides what the scheduler decides. It must never let a policy failure
// escape other than as a Status naming the policy.
package compose

import (
	"context"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/policy"
)

// Name is the name of the composition as the scheduler knows it (the
// plugin's name), in the reasons the scheduler itself writes about it.
const Name = "WasmPolicy"

// Member is one policy of a composition: a version of it and how the
// operator configured it. Members are given to NewCycle in order; Filter
// asks them in that order.
type Member struct {
	// Name is the operator's name for the policy, in reasons, metrics and
	// events.
	Name    string
	Version *policy.Policy
	// Weight weighs the policy's normalised scores against the other
	// policies' (1..100); 0 means 1.
	Weight int64
	// Ignore is failurePolicy Ignore: a failing policy is left out for the
	// rest of the cycle. Otherwise (Fail) its failure is the verdict.
	Ignore bool
	// Observer is told of the policy's calls and failures; nil for none.
	Observer Observer
	// BatchFilter decides, at the cycle's first Filter, whether this
	// policy judges every node of the snapshot in one batch
	// (policy.FilterAll) rather than node by node. nil: always batch.
	BatchFilter func(e *Entry, nodes int) bool
	// AfterFilter, if set, is called with each of the policy's Filter
	// verdicts (the plugin compares shadow policies there), from the
	// Filter goroutines: it must be safe for concurrent use.
	AfterFilter func(ctx context.Context, c *Cycle, ni fwk.NodeInfo, s policy.Status, err error)
	// AfterScore, if set, is called once per cycle from NormalizeScore with
	// the nodes and the policy's final scores of them (normalised, in
	// range, in the same order), when they count in the combined score. It
	// must not keep or modify either slice.
	AfterScore func(ctx context.Context, c *Cycle, nodes []fwk.NodeInfo, scores []policy.NodeScore)
	// AfterPermit, if set, is called with the policy's Permit answer on ni
	// (err is a failure, a guest's own Error verdict included), before
	// the composition acts on it. It must not keep waiting.
	AfterPermit func(ctx context.Context, c *Cycle, ni fwk.NodeInfo, waiting []*abiv1.WaitingPod, res policy.PermitResult, err error)
}

// Observer is told what the composition does with one policy, for metrics
// and logs. It is called from the scheduler's goroutines (Filter and Score
// run on many at once) and must be safe for concurrent use.
type Observer interface {
	// Called reports guest calls that returned (with a verdict or an
	// error).
	Called(Call)
	// Failed reports a failure of the policy and what the composition made
	// of it. err names the policy, its version, the call and the kind of
	// failure.
	Failed(ctx context.Context, pod *v1.Pod, pt abiv1.Point, err *engine.CallError, o Outcome)
}

// Call is one or more guest calls at one extension point.
type Call struct {
	Point abiv1.Point
	// Took is how long the call took; 0 when it was part of another call
	// (a NormalizeScore the guest ran inside a batched Score).
	Took time.Duration
	// Calls is how many guest calls it stands for: 1, or the nodes of a
	// batch.
	Calls  int
	Status policy.Status
	Err    error
}

// Rejected reports whether the call answered a verdict that turns the pod
// away (Unschedulable, UnschedulableAndUnresolvable), rather than success,
// Skip or Wait.
func (c Call) Rejected() bool {
	switch c.Status.Code {
	case abiv1.Code_CODE_UNSCHEDULABLE, abiv1.Code_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE:
		return true
	}
	return false
}

// Outcome is what the composition made of a policy failure.
type Outcome int

const (
	// Fail: failurePolicy Fail; the failure is the verdict.
	Fail Outcome = iota
	// Skip: failurePolicy Ignore; the policy is left out for the rest of
	// the cycle from now on.
	Skip
	// SkipAgain: failurePolicy Ignore, for a policy another call of the
	// same cycle already left out.
	SkipAgain
	// Retry: a batched call failed; the calls are made again node by node,
	// where the failure policy applies if the failure recurs.
	Retry
)

// Status is a composed verdict. A nil *Status is success.
type Status struct {
	Code    abiv1.Code
	Reasons []string
	// Policy is the member whose verdict it is; "" for the composition's
	// own.
	Policy string
	// Err is the policy failure behind a failure verdict (failurePolicy
	// Fail), nil for a policy's own verdict.
	Err *engine.CallError
}

// Message is the status's reasons joined, as the scheduler prints them.
func (s *Status) Message() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.Reasons, ", ")
}

// verdict turns a member's non-success verdict into a Status.
func verdict(e *Entry, s policy.Status) *Status {
	return &Status{Code: s.Code, Reasons: s.Reasons, Policy: e.Name}
}

// Cycle is one pod's scheduling cycle over the composed policies: the
// members, pinned for the whole cycle (binding included), and what each
// decided along the way. Create it with NewCycle at PreFilter.
//
// Its methods follow the scheduler's order (PreFilter, Filter for any node,
// PostFilter, PreScore, Score, NormalizeScore, Reserve, Permit, PreBind,
// PostBind or Unreserve). Filter and Score may be called from many
// goroutines at once; the others from one at a time.
type Cycle struct {
	// Policy is the cycle as the policies see it: the pod and the snapshot.
	Policy  *policy.Cycle
	Entries []*Entry

	// Names, when set, remembers node names across the cycles of a
	// scheduling profile (NodeNames).
	Names *NodeNames

	// scored are the nodes PreScore was given, in order.
	scored     []fwk.NodeInfo
	scoreOrder scoredNodes
	// direct is the entry whose raw scores are the composition's raw
	// scores (Cycle.direct), set by PreScore; nil when there is none.
	direct *Entry
	// rescore: the cycle scores only the nodes Score is asked about, and
	// NormalizeScore takes every other raw score from the scheduler
	// (Rescore).
	rescore bool
	// rawScorer is the version whose raw scores the scheduler holds for
	// every node NormalizeScore normalised (RawScorer).
	rawScorer *policy.Policy
}

// NewCycle starts a cycle of pod over the snapshot nodes with members, in
// order.
func NewCycle(pod *v1.Pod, nodes []fwk.NodeInfo, members []Member) *Cycle {
	c := &Cycle{Policy: policy.NewCycle(pod, nodes), Entries: make([]*Entry, len(members))}
	for i, m := range members {
		if m.Weight <= 0 {
			m.Weight = 1
		}
		c.Entries[i] = &Entry{Member: m}
	}
	return c
}

// Pod is the pod of the cycle.
func (c *Cycle) Pod() *v1.Pod { return c.Policy.Pod }

// Implements reports whether a member of the cycle, not left out, exports
// pt.
func (c *Cycle) Implements(pt abiv1.Point) bool {
	for _, e := range c.Entries {
		if e.implements(pt) {
			return true
		}
	}
	return false
}

// Exports reports whether a member of the cycle exports pt, left out or
// not.
func (c *Cycle) Exports(pt abiv1.Point) bool {
	for _, e := range c.Entries {
		if e.Version.Implements(pt) {
			return true
		}
	}
	return false
}
