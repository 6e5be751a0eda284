//go:build k8s1.36

package plugin

import (
	"context"

	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/convert"
)

var _ fwk.PlacementScorePlugin = &Plugin{}

// ScorePlacement implements fwk.PlacementScorePlugin (1.36 signature).
func (pl *Plugin) ScorePlacement(ctx context.Context, _ fwk.PodGroupCycleState, info fwk.PodGroupInfo, a *fwk.PodGroupAssignments) (int64, *fwk.Status) {
	return pl.scorePlacement(ctx, info, a)
}

// podGroupOf: 1.36's PodGroupInfo carries no object; it is looked up.
func (pl *Plugin) podGroupOf(fwk.PodGroupInfo) *abiv1.PodGroup { return nil }

// podGroupObject is the PodGroup the scheduler's DRA manager lists (1.36
// keeps PodGroups there), or nil.
func (pl *Plugin) podGroupObject(namespace, name string) *abiv1.PodGroup {
	if pl.handle == nil || pl.handle.SharedDRAManager() == nil {
		return nil
	}
	l := pl.handle.SharedDRAManager().PodGroups()
	if l == nil {
		return nil
	}
	pg, err := l.Get(namespace, name)
	if err != nil {
		return nil
	}
	return convert.PodGroup(pg)
}

// placementTried: 1.36's snapshot does not tell which placement it holds.
func (pl *Plugin) placementTried() string { return "" }
