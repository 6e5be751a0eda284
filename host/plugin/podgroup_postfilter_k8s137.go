//go:build !k8s1.35 && !k8s1.36

package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/engine"
)

// PodGroupPostFilter (Kubernetes 1.37, gate GenericWorkload): the
// scheduler calls it when a pod-group cycle found no placement for the
// whole group, after its own PodGroupPostFilter plugins (group preemption)
// found no way either. Policies exporting the point say why, in order:
// Unschedulable adds the policy's reasons to every member's status and
// lets the next policy speak; UnschedulableAndUnresolvable ends there and
// stops the plugins after WasmPolicy; Success says the group can be made
// to fit, with the policy's nominations (members to nodes), which the
// scheduler sets on the members before trying the group again. A policy
// failing (trap, timeout, a bad answer, its Error) fails the group's cycle
// with the error, or is passed over under failurePolicy Ignore.

var _ fwk.PodGroupPostFilterPlugin = &Plugin{}

// PodGroupPostFilter implements fwk.PodGroupPostFilterPlugin. The
// scheduling function (re-running the group's cycle) is not used: the
// policies judge the snapshot as the failed cycle left it.
func (pl *Plugin) PodGroupPostFilter(ctx context.Context, state fwk.PodGroupCycleState, info fwk.PodGroupInfo, _ fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	runs := pl.placementPolicies(abiv1.Point_POINT_POD_GROUP_POST_FILTER)
	// A composite group (gate CompositePodGroup, alpha) has no PodGroup
	// object and no pods of its own: the ABI cannot describe it, so its
	// policies are not asked.
	if len(runs) == 0 || info == nil || info.GetType() == fwk.CompositePodGroupKeyType {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if pl.handle == nil || pl.handle.SnapshotSharedLister() == nil {
		return nil, fwk.AsStatus(fmt.Errorf("%s: PodGroupPostFilter needs the scheduler's framework handle", Name))
	}
	nodes, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	return pl.podGroupPostFilter(ctx, runs, state, info, nodes)
}

// podGroupPostFilter runs the policies' PodGroupPostFilter on the
// snapshot's nodes.
func (pl *Plugin) podGroupPostFilter(ctx context.Context, runs []placementRun, state fwk.PodGroupCycleState, info fwk.PodGroupInfo, nodes []fwk.NodeInfo) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	var rejection []string
	if state != nil {
		if d, err := state.Read(groupRejectionKey); err == nil {
			rejection = []string{d.(*groupRejection).msg}
		}
	}
	g := pl.placementGroup(info)
	var reasons []string
	for _, r := range runs {
		noms, s, err := r.version.PodGroupPostFilter(ctx, g, nodes, rejection)
		if err == nil && s.Code == abiv1.Code_CODE_ERROR {
			err = fmt.Errorf("%s", strings.Join(s.Reasons, "; "))
		}
		if err != nil {
			if r.ignore {
				continue
			}
			if ce := (*engine.CallError)(nil); !errors.As(err, &ce) {
				err = fmt.Errorf("policy %s: pod_group_post_filter: %w", r.name, err)
			}
			return nil, fwk.AsStatus(err).WithPlugin(Name)
		}
		said := make([]string, len(s.Reasons))
		for i, reason := range s.Reasons {
			said[i] = fmt.Sprintf("policy %s: %s", r.name, reason)
		}
		switch s.Code {
		case abiv1.Code_CODE_SUCCESS:
			res := &fwk.PodGroupPostFilterResult{NominatingInfos: make(map[types.NamespacedName]*fwk.NominatingInfo, len(noms))}
			for _, n := range noms {
				res.NominatingInfos[types.NamespacedName{Namespace: n.Pod.Namespace, Name: n.Pod.Name}] = &fwk.NominatingInfo{NominatedNodeName: n.Node, NominatingMode: fwk.ModeOverride}
			}
			return res, fwk.NewStatus(fwk.Success, said...).WithPlugin(Name)
		case abiv1.Code_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE:
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, append(reasons, said...)...).WithPlugin(Name)
		default:
			reasons = append(reasons, said...)
		}
	}
	return nil, fwk.NewStatus(fwk.Unschedulable, reasons...).WithPlugin(Name)
}
