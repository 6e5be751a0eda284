package compose

import (
	"context"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// SelectVictims asks the members that choose preemption victims
// (POINT_SELECT_VICTIMS), in order, which pods to evict from ni so that
// the pod fits there. The victims are the union of their answers, in the
// order given (the first member's, then what later members add); a
// rejection by any member means evicting cannot help on this node and is
// the verdict. Failure policies apply as at Filter: under Fail the node is
// Unschedulable, under Ignore the member is left out. Members without the
// point have their say when the caller checks the pod fits without the
// victims (Filter under changes). Safe for concurrent use.
func (c *Cycle) SelectVictims(ctx context.Context, ni fwk.NodeInfo) ([]string, *Status) {
	var (
		victims []string
		seen    = map[string]bool{}
	)
	for _, e := range c.Entries {
		if !e.implements(abiv1.Point_POINT_SELECT_VICTIMS) {
			continue
		}
		start := time.Now()
		uids, s, err := e.Version.SelectVictims(ctx, c.Policy, ni)
		e.called(abiv1.Point_POINT_SELECT_VICTIMS, start, 1, s, err)
		if err == nil {
			err = guestError(e, abiv1.Point_POINT_SELECT_VICTIMS, s)
		}
		if err != nil {
			if fs := c.fail(ctx, e, abiv1.Point_POINT_SELECT_VICTIMS, err); fs != nil {
				return nil, fs
			}
			continue
		}
		if !s.IsSuccess() {
			return nil, verdict(e, s)
		}
		for _, uid := range uids {
			if !seen[uid] {
				seen[uid] = true
				victims = append(victims, uid)
			}
		}
	}
	return victims, nil
}
