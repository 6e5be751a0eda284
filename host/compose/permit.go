package compose

import (
	"context"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// MaxPermitWait bounds how long a pod may wait at Permit: a policy that asks
// for no timeout, or a longer one, gets this.
const MaxPermitWait = 15 * time.Minute

// PermitResult is the composed Permit verdict.
type PermitResult struct {
	// Status is nil to allow the pod, Wait to park it, or the first
	// rejection or failure.
	Status *Status
	// Wait is how long the pod waits: the longest any policy asked.
	Wait time.Duration
	// WaitFor names the policies that made the pod wait, in order.
	WaitFor []string
	// Actions are the policies' verdicts on other waiting pods, in order,
	// from every policy that answered. Rejections apply always; allowances
	// only when Status is nil (a gang must not bind without the member
	// whose Permit failed).
	Actions []Actions
}

// Actions are one policy's verdicts on waiting pods.
type Actions struct {
	Entry   *Entry
	Actions []*abiv1.WaitingPodAction
}

// Permit asks every policy that exports it whether the pod may bind on ni,
// in order, until one rejects it or fails. A Wait from any policy parks the
// pod for the longest timeout asked, at most MaxPermitWait.
func (c *Cycle) Permit(ctx context.Context, ni fwk.NodeInfo, waiting []*abiv1.WaitingPod) PermitResult {
	var (
		out     PermitResult
		reasons []string
	)
	for _, e := range c.Entries {
		if !e.implements(abiv1.Point_POINT_PERMIT) {
			continue
		}
		start := time.Now()
		res, err := e.Version.Permit(ctx, c.Policy, ni, waiting)
		e.called(abiv1.Point_POINT_PERMIT, start, 1, res.Status, err)
		if err == nil {
			err = guestError(e, abiv1.Point_POINT_PERMIT, res.Status)
		}
		if e.AfterPermit != nil {
			e.AfterPermit(ctx, c, ni, waiting, res, err)
		}
		if err != nil {
			if s := c.fail(ctx, e, abiv1.Point_POINT_PERMIT, err); s != nil {
				out.Status = s
				break
			}
			continue
		}
		out.Actions = append(out.Actions, Actions{e, res.Actions})
		switch res.Status.Code {
		case abiv1.Code_CODE_SUCCESS:
		case abiv1.Code_CODE_WAIT:
			t := res.Timeout
			if t <= 0 || t > MaxPermitWait {
				t = MaxPermitWait
			}
			out.Wait = max(out.Wait, t)
			reasons = append(reasons, res.Status.Reasons...)
			out.WaitFor = append(out.WaitFor, e.Name)
		default:
			out.Status = verdict(e, res.Status)
		}
		if out.Status != nil {
			break
		}
	}
	if out.Status != nil {
		out.Wait, out.WaitFor = 0, nil
		return out
	}
	if out.Wait > 0 {
		out.Status = &Status{Code: abiv1.Code_CODE_WAIT, Reasons: reasons}
	}
	return out
}

// NodeCall runs Reserve, PreBind, PostBind or Unreserve on ni in every
// policy that exports it, in order. At Reserve and PreBind the first
// rejection or failure stops it and is returned. PostBind and Unreserve
// have no verdict: every policy is called, and their failures are only
// reported to the observers. Unreserve also returns the policies' verdicts
// on waiting pods (a gang releasing its members).
func (c *Cycle) NodeCall(ctx context.Context, pt abiv1.Point, ni fwk.NodeInfo, waiting []*abiv1.WaitingPod) (*Status, []Actions) {
	informational := pt == abiv1.Point_POINT_POST_BIND || pt == abiv1.Point_POINT_UNRESERVE
	var acts []Actions
	for _, e := range c.Entries {
		if !e.implements(pt) {
			continue
		}
		start := time.Now()
		s, a, err := e.Version.NodeCall(ctx, pt, c.Policy, ni, waiting)
		e.called(pt, start, 1, s, err)
		if err == nil {
			err = guestError(e, pt, s)
		}
		if err != nil {
			if fs := c.fail(ctx, e, pt, err); fs != nil && !informational {
				return fs, acts
			}
			continue
		}
		if len(a) > 0 {
			acts = append(acts, Actions{e, a})
		}
		if !informational && !s.IsSuccess() {
			return verdict(e, s), acts
		}
	}
	return nil, acts
}

// NodeCalls reports whether a policy of the cycle is called after the
// scheduling cycle (Unreserve, PreBind, PostBind): only then does the
// binding phase need a copy of the chosen node.
func (c *Cycle) NodeCalls() bool {
	for _, pt := range []abiv1.Point{abiv1.Point_POINT_UNRESERVE, abiv1.Point_POINT_PRE_BIND, abiv1.Point_POINT_POST_BIND} {
		if c.Exports(pt) {
			return true
		}
	}
	return false
}
