//go:build k8s1.36

package plugin

import (
	"context"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"

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

// podGroupObject is the PodGroup in the scheduler's informer, or nil. The
// scheduler watches PodGroups (v1alpha2) with the GenericWorkload gate on;
// without it no pod names a group and this is never asked.
func (pl *Plugin) podGroupObject(namespace, name string) *abiv1.PodGroup {
	if pl.handle == nil || pl.handle.SharedInformerFactory() == nil || !utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		return nil
	}
	pg, err := pl.handle.SharedInformerFactory().Scheduling().V1alpha2().PodGroups().Lister().PodGroups(namespace).Get(name)
	if err != nil {
		return nil
	}
	return convert.PodGroup(pg)
}

// placementTried: 1.36's snapshot does not tell which placement it holds.
func (pl *Plugin) placementTried() string { return "" }
