package compose

import (
	"context"
	"errors"
	"fmt"
	"strings"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/policy"
)

// fail applies e's failure policy to a failed call at pt: the one place a
// policy failure becomes a verdict. err is what the call returned, or
// what the composition found wrong with its answer (guestError,
// badAnswer). It returns the verdict, or nil when the policy is left out
// for the rest of the cycle (failurePolicy Ignore). A call the scheduler
// abandoned is an Error, not the policy's failure.
//
// Under failurePolicy Fail the verdict is Unschedulable, except at Score
// and NormalizeScore, whose failure fails the cycle (Error): a node cannot
// be left out of scoring, and scoring on without the policy would place
// the pod by the other policies alone.
func (c *Cycle) fail(ctx context.Context, e *Entry, pt abiv1.Point, err error) *Status {
	if abandoned(ctx, err) {
		// Not the policy's failure: the scheduler stopped the cycle.
		return &Status{Code: abiv1.Code_CODE_ERROR, Policy: e.Name, Reasons: []string{err.Error()}}
	}
	ce := e.callError(pt, err)
	if e.Ignore {
		o := Skip
		if !e.ignored.CompareAndSwap(false, true) {
			o = SkipAgain
		}
		e.failed(ctx, c, pt, ce, o)
		return nil
	}
	e.failed(ctx, c, pt, ce, Fail)
	code := abiv1.Code_CODE_UNSCHEDULABLE
	if pt == abiv1.Point_POINT_SCORE || pt == abiv1.Point_POINT_NORMALIZE_SCORE {
		code = abiv1.Code_CODE_ERROR
	}
	return &Status{Code: code, Policy: e.Name, Err: ce,
		Reasons: []string{fmt.Sprintf("%s: policy failed (failurePolicy Fail): %v", e.Name, ce)}}
}

// retry reports a batched call that failed: the calls are made again node
// by node, where the failure policy applies.
func (c *Cycle) retry(ctx context.Context, e *Entry, pt abiv1.Point, err error) {
	if !abandoned(ctx, err) {
		e.failed(ctx, c, pt, e.callError(pt, err), Retry)
	}
}

func (e *Entry) failed(ctx context.Context, c *Cycle, pt abiv1.Point, err *engine.CallError, o Outcome) {
	if e.Observer != nil {
		e.Observer.Failed(ctx, c.Pod(), pt, err, o)
	}
}

// callError is err as a CallError that names the policy, its version, the
// call and the kind of failure. Every error host/policy returns is one
// already; anything else failed on the host's side of the call.
func (e *Entry) callError(pt abiv1.Point, err error) *engine.CallError {
	if ce, ok := err.(*engine.CallError); ok {
		return ce
	}
	return e.Version.CallError(engine.PointName(pt), engine.KindHost, err)
}

// guestError is a guest's own Error verdict as a failure, so that the
// failure policy applies to it as to a trap; nil for any other verdict.
func guestError(e *Entry, pt abiv1.Point, s policy.Status) error {
	if s.Code != abiv1.Code_CODE_ERROR {
		return nil
	}
	return e.Version.CallError(engine.PointName(pt), engine.KindGuest,
		fmt.Errorf("policy reported an error: %s", strings.Join(s.Reasons, "; ")))
}

// mustSucceed is the failure of a call that may only succeed or fail
// (Score, NormalizeScore): an Error verdict is the guest's own failure,
// any other verdict breaks the ABI.
func mustSucceed(e *Entry, pt abiv1.Point, s policy.Status) error {
	if s.IsSuccess() {
		return nil
	}
	if err := guestError(e, pt, s); err != nil {
		return err
	}
	return e.Version.CallError(engine.PointName(pt), engine.KindInvalid,
		fmt.Errorf("answered %s %v; only Success or Error may answer it", policy.CodeName(s.Code), s.Reasons))
}

// abandoned reports whether err is the scheduler cancelling ctx, not a
// failure of the call: the cycle was abandoned (another node or plugin
// failed, or Filter found enough nodes) while the call waited.
func abandoned(ctx context.Context, err error) bool {
	return ctx.Err() != nil && errors.Is(err, ctx.Err())
}
