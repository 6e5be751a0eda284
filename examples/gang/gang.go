package main

import (
	"errors"
	"strconv"
	"time"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
)

// The label and annotation that make a pod a gang member.
const (
	// LabelName names the pod's gang; gangs are per namespace.
	LabelName = "gang.wasmsched.io/name"
	// AnnotationMinAvailable is how many members must be ready (waiting at
	// Permit or placed) before any of them may bind.
	AnnotationMinAvailable = "gang.wasmsched.io/min-available"
)

// maxTimeoutSeconds is the longest wait the scheduler plugin grants at
// Permit (host/plugin clamps longer ones); a longer setting would be
// silently shortened, so it is refused instead.
const maxTimeoutSeconds = 900

// Settings are the operator's settings.
type Settings struct {
	// TimeoutSeconds is how long a member waits at Permit for the rest of
	// its gang.
	TimeoutSeconds int `json:"timeoutSeconds"`
}

// DefaultSettings returns the settings of an operator who configured nothing.
func DefaultSettings() Settings { return Settings{TimeoutSeconds: 30} }

// Policy is the validated configuration. It holds no per-cycle data.
type Policy struct {
	timeout time.Duration
}

// New validates s and builds the policy. Errors name the offending field.
func New(s Settings) (*Policy, error) {
	if s.TimeoutSeconds < 1 || s.TimeoutSeconds > maxTimeoutSeconds {
		return nil, errors.New(`settings: "timeoutSeconds" must be between 1 and ` + strconv.Itoa(maxTimeoutSeconds) +
			` (the scheduler's longest Permit wait), got ` + strconv.Itoa(s.TimeoutSeconds))
	}
	return &Policy{timeout: time.Duration(s.TimeoutSeconds) * time.Second}, nil
}

// Gang is the group a pod belongs to.
type Gang struct {
	Namespace    string
	Name         string
	MinAvailable int64
}

// Membership reads pod's gang from its label and annotation. It returns nil
// for a pod without the label, and an error, starting "gang: ", for a pod
// whose label or annotation is malformed.
func Membership(pod *guest.Pod) (*Gang, error) {
	name, ok := pod.Label(LabelName)
	if !ok {
		return nil, nil
	}
	if name == "" {
		return nil, errors.New("gang: label " + LabelName + " is empty")
	}
	v, ok := pod.Annotation(AnnotationMinAvailable)
	if !ok {
		return nil, errors.New("gang: pod has label " + LabelName + "=" + name + " but no annotation " + AnnotationMinAvailable)
	}
	n, ok := guest.ParseInt(v)
	if !ok || n < 1 {
		return nil, errors.New("gang: annotation " + AnnotationMinAvailable + " is " + strconv.Quote(v) + ", want a positive integer")
	}
	return &Gang{Namespace: pod.Namespace(), Name: name, MinAvailable: n}, nil
}

// has reports whether a pod with that namespace and labels is a member.
func (g *Gang) has(namespace string, labels []*abiv1.KeyValue) bool {
	if namespace != g.Namespace {
		return false
	}
	v, ok := guest.Lookup(labels, LabelName)
	return ok && v == g.Name
}

// roll is who of a gang is ready.
type roll struct {
	// ready holds the UIDs of the members waiting at Permit or placed on a
	// node, and the pod being scheduled.
	ready map[string]bool
	// waiting are the UIDs of the waiting members other than the pod being
	// scheduled, in the order the host listed them.
	waiting []string
}

// call takes the roll of g for the pod of cycle c, over the waiting pods and
// the pods on the nodes c.EachNode gives. A pod waiting at Permit is also on
// its node as an assumed pod, and the host may or may not list the pod being
// scheduled among the waiting: UIDs make every member count once.
func (g *Gang) call(c *guest.Cycle, waiting []guest.WaitingPod) roll {
	self := c.Pod.UID()
	r := roll{ready: map[string]bool{self: true}}
	for _, w := range waiting {
		uid := w.UID()
		if !g.has(w.Namespace(), w.Labels()) || r.ready[uid] {
			continue
		}
		r.ready[uid] = true
		r.waiting = append(r.waiting, uid)
	}
	c.EachNode(func(n *guest.NodeInfo) bool {
		for _, s := range n.Pods() {
			if g.has(s.GetNamespace(), s.GetLabels()) {
				r.ready[s.GetUid()] = true
			}
		}
		return true
	})
	return r
}

// cycleState is what PreFilter leaves for Permit and Unreserve.
type cycleState struct {
	// gang is nil for a pod outside any gang.
	gang *Gang
}

// PreFilter rejects a pod whose gang label or annotation is malformed, so
// that it never waits at Permit under a rule it does not state correctly.
func (p *Policy) PreFilter(c *guest.Cycle) guest.Status {
	g, err := Membership(c.Pod)
	if err != nil {
		return guest.RejectUnresolvable("%s", err.Error())
	}
	c.State = &cycleState{gang: g}
	return guest.OK()
}

// gangOf returns the cycle's gang (nil outside any gang), or an error
// status when PreFilter did not leave state.
func gangOf(c *guest.Cycle) (*Gang, guest.Status) {
	st, ok := c.State.(*cycleState)
	if !ok {
		return nil, guest.Errorf("gang: no cycle state: PreFilter did not run")
	}
	return st.gang, guest.OK()
}

// Permit lets the pod bind once its gang is complete; see Admit.
func (p *Policy) Permit(c *guest.Cycle, _ *guest.NodeInfo, waiting []guest.WaitingPod) guest.PermitResult {
	g, s := gangOf(c)
	if !s.IsSuccess() {
		return guest.PermitResult{Status: s}
	}
	return p.Admit(c, g, waiting)
}

// Admit is Permit's rule. A pod outside any gang is allowed at once. A
// member is allowed, together with every waiting member of its gang, when
// at least MinAvailable members are ready (waiting, placed, or the pod
// itself); otherwise it waits up to the configured timeout.
func (p *Policy) Admit(c *guest.Cycle, g *Gang, waiting []guest.WaitingPod) guest.PermitResult {
	if g == nil {
		return guest.PermitResult{Status: guest.OK()}
	}
	r := g.call(c, waiting)
	ready := int64(len(r.ready))
	if ready < g.MinAvailable {
		return guest.PermitResult{
			Status: guest.Status{Code: guest.Wait, Reasons: []string{"gang: group " + g.Name + " has " + strconv.FormatInt(ready, 10) +
				" of " + strconv.FormatInt(g.MinAvailable, 10) + " members ready, waiting for " + strconv.FormatInt(g.MinAvailable-ready, 10) + " more"}},
			Timeout: p.timeout,
		}
	}
	acts := make([]guest.WaitingPodAction, len(r.waiting))
	for i, uid := range r.waiting {
		acts[i] = guest.WaitingPodAction{UID: uid, Allow: true}
	}
	return guest.PermitResult{Status: guest.OK(), Actions: acts}
}

// Unreserve releases the gang when one member's reservation is undone; see
// Release.
func (p *Policy) Unreserve(c *guest.Cycle, _ *guest.NodeInfo, waiting []guest.WaitingPod) []guest.WaitingPodAction {
	g, s := gangOf(c)
	if !s.IsSuccess() {
		guest.Errorlogf("%s", s.Reasons[0])
		return nil
	}
	return Release(c, g, waiting)
}

// Release is Unreserve's rule: the scheduler undoes a member's reservation
// when its wait at Permit timed out (or a later step failed), and the gang
// cannot be complete without it, so every other waiting member is rejected
// and gives back what it reserved. They return to the scheduling queue and
// gather again.
func Release(c *guest.Cycle, g *Gang, waiting []guest.WaitingPod) []guest.WaitingPodAction {
	if g == nil {
		return nil
	}
	r := g.call(c, waiting)
	if len(r.waiting) == 0 {
		return nil
	}
	reason := "gang: group " + g.Name + " released: " + strconv.Itoa(len(r.ready)) + " of " + strconv.FormatInt(g.MinAvailable, 10) +
		" members ready when " + c.Pod.Key() + " timed out or failed"
	acts := make([]guest.WaitingPodAction, len(r.waiting))
	for i, uid := range r.waiting {
		acts[i] = guest.WaitingPodAction{UID: uid, Allow: false, Reason: reason}
	}
	return acts
}
