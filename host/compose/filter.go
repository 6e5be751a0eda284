package compose

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/policy"
)

// PreFilterResult is the composed PreFilter verdict.
type PreFilterResult struct {
	// Status is a rejection (every node gets it) or a failure; nil when
	// the cycle goes on.
	Status *Status
	// NodeNames, when not nil, are the only nodes to filter: the
	// intersection of the policies' node subsets.
	NodeNames sets.Set[string]
	// Skip: no policy filters this pod and none restricts its nodes, so
	// Filter has nothing to do.
	Skip bool
}

// PreFilter starts the cycle in every policy that needs it (a PreFilter to
// run, or the whole snapshot to see), in order, and merges their node
// subsets. The first rejection or failure stops it.
func (c *Cycle) PreFilter(ctx context.Context) PreFilterResult {
	var (
		out       PreFilterResult
		anyFilter bool
	)
	for _, e := range c.Entries {
		if !e.Version.Implements(abiv1.Point_POINT_PRE_FILTER) && !e.Version.Info().WantsAllNodes {
			anyFilter = anyFilter || e.Version.Implements(abiv1.Point_POINT_FILTER)
			continue
		}
		start := time.Now()
		res, err := e.Version.PreFilter(ctx, c.Policy)
		e.called(abiv1.Point_POINT_PRE_FILTER, start, 1, res.Status, err)
		if err == nil {
			err = guestError(e, abiv1.Point_POINT_PRE_FILTER, res.Status)
		}
		if err != nil {
			if s := c.fail(ctx, e, abiv1.Point_POINT_PRE_FILTER, err); s != nil {
				return PreFilterResult{Status: s}
			}
			continue
		}
		switch res.Status.Code {
		case abiv1.Code_CODE_SUCCESS:
		case abiv1.Code_CODE_SKIP:
			e.skipFilter = true
			continue
		default:
			return PreFilterResult{Status: verdict(e, res.Status)}
		}
		anyFilter = anyFilter || e.Version.Implements(abiv1.Point_POINT_FILTER)
		if res.Restricted {
			set := sets.New(res.NodeNames...)
			if out.NodeNames == nil {
				out.NodeNames = set
			} else {
				out.NodeNames = out.NodeNames.Intersection(set)
			}
		}
	}
	out.Skip = !anyFilter && out.NodeNames == nil
	return out
}

// Filter passes ni only if every policy passes it, in order. It returns
// the verdict and, for a rejection or failure, the member that gave it.
// Safe for concurrent use.
func (c *Cycle) Filter(ctx context.Context, ni fwk.NodeInfo) (*Status, *Entry) {
	return c.filter(ctx, ni, nil)
}

// FilterChanged is Filter on a node the scheduler modified for a simulation
// (preemption, nominated pods) by changes, in order: members that follow
// pod changes (POINT_POD_CHANGES) replay them on a fresh PreFilter state,
// the others filter the node as it is. No batch verdict applies, and shadow
// policies are not compared on simulations. With no changes it is Filter.
func (c *Cycle) FilterChanged(ctx context.Context, ni fwk.NodeInfo, changes []policy.PodChange) (*Status, *Entry) {
	if len(changes) == 0 {
		return c.Filter(ctx, ni)
	}
	return c.filter(ctx, ni, changes)
}

func (c *Cycle) filter(ctx context.Context, ni fwk.NodeInfo, changes []policy.PodChange) (*Status, *Entry) {
	for _, e := range c.Entries {
		if e.skipFilter || !e.implements(abiv1.Point_POINT_FILTER) {
			continue
		}
		e.asked.Add(1)
		start := time.Now()
		var (
			s   policy.Status
			ok  bool
			err error
		)
		switch {
		case changes == nil:
			s, ok = c.batchFilter(ctx, e).Lookup(ni)
		case e.Version.Implements(abiv1.Point_POINT_POD_CHANGES):
			s, err = e.Version.FilterChanged(ctx, c.Policy, ni, changes)
			ok = true
		}
		if !ok {
			s, err = e.Version.Filter(ctx, c.Policy, ni)
		}
		e.called(abiv1.Point_POINT_FILTER, start, 1, s, err)
		if err == nil {
			err = guestError(e, abiv1.Point_POINT_FILTER, s)
		}
		if e.AfterFilter != nil && changes == nil {
			e.AfterFilter(ctx, c, ni, s, err)
		}
		if err != nil {
			if abandoned(ctx, err) {
				// The scheduler found enough feasible nodes and stopped
				// filtering while this call waited: an Error here would
				// fail the whole cycle of a pod that has its nodes.
				return &Status{Code: abiv1.Code_CODE_UNSCHEDULABLE, Policy: e.Name,
					Reasons: []string{fmt.Sprintf("%s: node not evaluated: the scheduler stopped filtering (%v)", e.Name, ctx.Err())}}, e
			}
			if s := c.fail(ctx, e, abiv1.Point_POINT_FILTER, err); s != nil {
				return s, e
			}
			continue
		}
		if !s.IsSuccess() {
			return verdict(e, s), e
		}
	}
	return nil, nil
}

// batchFilter returns the cycle's Filter verdicts of e's policy on the
// snapshot, judging every node in one batch on the first call, or nil when
// the member's BatchFilter says batching does not pay. The other Filter
// goroutines wait for it: they would otherwise queue for the same few
// instances. Nodes the batch did not judge at their current generation
// (preemption's modified copies) are filtered one by one.
func (c *Cycle) batchFilter(ctx context.Context, e *Entry) *policy.Verdicts {
	e.filterOnce.Do(func() {
		nodes := len(c.Policy.Nodes)
		e.nodes = nodes
		if nodes == 0 || (e.BatchFilter != nil && !e.BatchFilter(e, nodes)) {
			return
		}
		v, err := e.Version.FilterAll(ctx, c.Policy, c.Policy.Nodes)
		if err != nil {
			// The failure policy applies when Filter meets the failure
			// again node by node (an intermittent one it may not meet).
			c.retry(ctx, e, abiv1.Point_POINT_FILTER, err)
			return
		}
		e.verdicts = v
	})
	return e.verdicts
}

// PostFilter gives the policies that export it their say when no node fits,
// in order, with every node's Filter verdict; the first nomination wins.
// It returns the nominated node, or a verdict: Unschedulable when no policy
// nominates, a failure under failurePolicy Fail.
func (c *Cycle) PostFilter(ctx context.Context, statuses []policy.NodeStatus) (string, *Status) {
	for _, e := range c.Entries {
		if !e.implements(abiv1.Point_POINT_POST_FILTER) {
			continue
		}
		start := time.Now()
		nominated, s, err := e.Version.PostFilter(ctx, c.Policy, statuses)
		e.called(abiv1.Point_POINT_POST_FILTER, start, 1, s, err)
		if err == nil {
			err = guestError(e, abiv1.Point_POINT_POST_FILTER, s)
		}
		if err != nil {
			if fs := c.fail(ctx, e, abiv1.Point_POINT_POST_FILTER, err); fs != nil {
				return "", fs
			}
			continue
		}
		if nominated != "" && s.IsSuccess() {
			return nominated, nil
		}
	}
	return "", &Status{Code: abiv1.Code_CODE_UNSCHEDULABLE}
}

// called tells the observer of a call that returned.
func (e *Entry) called(pt abiv1.Point, start time.Time, n int, s policy.Status, err error) {
	if e.Observer != nil {
		e.Observer.Called(Call{Point: pt, Took: time.Since(start), Calls: n, Status: s, Err: err})
	}
}
