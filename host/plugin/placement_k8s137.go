//go:build !k8s1.35 && !k8s1.36

package plugin

import (
	"context"

	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/convert"
)

var _ fwk.PlacementScorePlugin = &Plugin{}

// ScorePlacement implements fwk.PlacementScorePlugin (1.37 signature).
func (pl *Plugin) ScorePlacement(ctx context.Context, _ fwk.PlacementCycleState, info fwk.PodGroupInfo, a *fwk.PodGroupAssignments) (int64, *fwk.Status) {
	return pl.scorePlacement(ctx, info, a)
}

// podGroupOf is the PodGroup object of a placement call (nil for a
// composite group).
func (pl *Plugin) podGroupOf(info fwk.PodGroupInfo) *abiv1.PodGroup {
	return convert.PodGroup(info.GetPodGroup())
}

// podGroupObject is the PodGroup in the scheduler's snapshot, or nil.
func (pl *Plugin) podGroupObject(namespace, name string) *abiv1.PodGroup {
	if pl.handle == nil || pl.handle.SnapshotSharedLister() == nil {
		return nil
	}
	pg, err := pl.handle.SnapshotSharedLister().PodGroups().Get(namespace, name)
	if err != nil {
		return nil
	}
	return convert.PodGroup(pg)
}

// placementTried is the name of the placement the scheduler's snapshot
// holds assumed, or "".
func (pl *Plugin) placementTried() string {
	if pl.handle == nil {
		return ""
	}
	s, ok := pl.handle.SnapshotSharedLister().(interface{ GetPlacement() *fwk.Placement })
	if !ok {
		return ""
	}
	if p := s.GetPlacement(); p != nil {
		return p.Name
	}
	return ""
}
