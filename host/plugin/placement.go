//go:build !k8s1.35

package plugin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/convert"
	"github.com/wasmsched/wasmsched/host/lifecycle"
	"github.com/wasmsched/wasmsched/host/policy"
)

// Pod groups (Kubernetes 1.36 and later): the plugin tells policies a
// pod's PodGroup and whether its cycle is part of a pod-group cycle
// (withGroup, from PreFilter), and takes part in the pod-group cycle's
// placement points (PlacementGenerate, PlacementScore) for the policies
// that export them. The framework's signatures differ by minor
// (placement_k8s136.go, placement_k8s137.go); 1.35 has none of it
// (placement_k8s135.go).

var _ fwk.PlacementGeneratePlugin = &Plugin{}

// placementRun is one current, enforcing policy version exporting a
// placement point.
type placementRun struct {
	name    string
	version *policy.Policy
	weight  int64
	ignore  bool
}

// placementPolicies are the roster's enforcing policies whose current
// versions export pt, in order.
func (pl *Plugin) placementPolicies(pt abiv1.Point) []placementRun {
	var out []placementRun
	for _, run := range pl.currentRoster().runs {
		s := run.slot
		a := s.Args()
		if a.Mode == lifecycle.ModeShadow {
			continue
		}
		v := s.Current()
		if v == nil || !v.Implements(pt) {
			continue
		}
		out = append(out, placementRun{name: s.Name(), version: v, weight: max(1, a.Weight), ignore: a.FailurePolicy == lifecycle.FailurePolicyIgnore})
	}
	return out
}

// groupMessage is the PodGroup pods the framework names, with the
// scheduler's counts of its members, or nil when the scheduler does not
// know it.
func (pl *Plugin) groupMessage(namespace, name string, obj *abiv1.PodGroup) *abiv1.PodGroup {
	if obj == nil {
		obj = pl.podGroupObject(namespace, name)
	}
	if obj == nil {
		return nil
	}
	if pl.handle != nil {
		if l := pl.handle.SnapshotSharedLister(); l != nil {
			if st, err := l.PodGroupStates().Get(namespace, name); err == nil && st != nil {
				obj.Scheduled = int32(st.AssignedPods().Len())
				obj.Assumed = int32(st.AssumedPods().Len())
				obj.Pending = int32(len(st.UnscheduledPods()))
				obj.MemberNodes = memberNodes(st.ScheduledPods())
			}
		}
	}
	return obj
}

// memberNodes are the nodes of pods, sorted, each once.
func memberNodes(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		if p != nil && p.Spec.NodeName != "" {
			out = append(out, p.Spec.NodeName)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// withGroup sets, on a pod's cycle, its PodGroup (when a policy that wants
// pod groups takes part in pod cycles) and, in a pod-group cycle, the
// placement tried. It returns the policies' rejection of the
// pod's group, if PlacementGenerate recorded one (rejectGroup), and the
// policy that rejected it.
func (pl *Plugin) withGroup(cs fwk.CycleState, pod *v1.Pod, c *policy.Cycle) (*fwk.Status, string) {
	if cs != nil && cs.IsPodGroupSchedulingCycle() {
		if gs := cs.GetPodGroupSchedulingCycle(); gs != nil {
			if d, err := gs.Read(groupRejectionKey); err == nil {
				g := d.(*groupRejection)
				return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, g.msg).WithPlugin(Name), g.policy
			}
		}
		c.GroupCycle = &abiv1.GroupCycle{Placement: pl.placementTried()}
	}
	if name := convert.PodGroupName(pod); name != "" {
		for _, run := range pl.currentRoster().runs {
			if v := run.slot.Current(); v != nil && v.Info().GetWantsPodGroups() && v.InPodCycles() {
				c.Group = pl.groupMessage(pod.Namespace, name, nil)
				return nil, ""
			}
		}
	}
	return nil, ""
}

// placementGroup is the group of a placement call.
func (pl *Plugin) placementGroup(info fwk.PodGroupInfo) *policy.Group {
	pods := info.GetUnscheduledPods()
	return &policy.Group{PodGroup: pl.groupMessage(info.GetNamespace(), info.GetName(), pl.podGroupOf(info)), Pods: pods, Converted: pl.groupPods.get(pods)}
}

// GeneratePlacements implements fwk.PlacementGeneratePlugin. Without a
// policy that proposes placements the group is tried on the whole parent.
// With several, each divides the placements of the one before it. A
// policy that rejects the group rejects it; one that fails under
// failurePolicy Ignore leaves the placements as they were.
func (pl *Plugin) GeneratePlacements(ctx context.Context, state fwk.PodGroupCycleState, info fwk.PodGroupInfo, parent *fwk.Placement) (*fwk.GeneratePlacementsResult, *fwk.Status) {
	runs := pl.placementPolicies(abiv1.Point_POINT_PLACEMENT_GENERATE)
	current := []*fwk.Placement{parent}
	if len(runs) == 0 {
		return &fwk.GeneratePlacementsResult{Placements: current}, nil
	}
	g := pl.placementGroup(info)
	for _, r := range runs {
		var next []*fwk.Placement
		var rejections []string
		for _, in := range current {
			pls, s, err := r.version.GeneratePlacements(ctx, g, policy.Placement{Name: in.Name, Nodes: in.Nodes})
			if err == nil && s.Code == abiv1.Code_CODE_ERROR {
				err = fmt.Errorf("%s", strings.Join(s.Reasons, "; "))
			}
			if err != nil {
				if r.ignore {
					next = append(next, in)
					continue
				}
				return nil, fwk.AsStatus(fmt.Errorf("policy %s: placement_generate: %w", r.name, err)).WithPlugin(Name)
			}
			if !s.IsSuccess() {
				rejections = append(rejections, s.Reasons...)
				continue
			}
			for _, p := range pls {
				name := p.Name
				if in.Name != "" {
					name = in.Name + "/" + name
				}
				next = append(next, &fwk.Placement{Name: name, Nodes: p.Nodes})
			}
		}
		if len(next) == 0 {
			msg := fmt.Sprintf("policy %s proposed no placement for pod group %s/%s", r.name, info.GetNamespace(), info.GetName())
			if len(rejections) > 0 {
				msg = fmt.Sprintf("policy %s: %s", r.name, strings.Join(rejections, "; "))
			}
			return rejectGroup(state, parent, r.name, msg)
		}
		current = next
	}
	return &fwk.GeneratePlacementsResult{Placements: current}, nil
}

// groupRejectionKey holds, in a pod-group cycle's state, the policies'
// rejection of the whole group (rejectGroup).
const groupRejectionKey fwk.StateKey = Name + "/group-rejection"

type groupRejection struct{ policy, msg string }

func (g *groupRejection) Clone() fwk.StateData { return g }

// rejectGroup turns a group away. The scheduler handles a rejection at
// PlacementGenerate badly (1.36 retries it as an error; 1.37.2's
// DynamicResources PodGroupPostFilter fails on it, "not found", for a
// group without topology constraints), and neither shows the reason on the
// pods. So the rejection is kept in the group's cycle state, the group is
// tried on the parent placement, and each member's PreFilter rejects the
// member with the reason (withGroup): the pods stay pending with it.
func rejectGroup(state fwk.PodGroupCycleState, parent *fwk.Placement, policy, msg string) (*fwk.GeneratePlacementsResult, *fwk.Status) {
	if state == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, msg).WithPlugin(Name)
	}
	state.Write(groupRejectionKey, &groupRejection{policy: policy, msg: msg})
	return &fwk.GeneratePlacementsResult{Placements: []*fwk.Placement{parent}}, nil
}

// scorePlacement is ScorePlacement for both minors: the weighted sum of
// the raw scores of the policies that score placements.
func (pl *Plugin) scorePlacement(ctx context.Context, info fwk.PodGroupInfo, a *fwk.PodGroupAssignments) (int64, *fwk.Status) {
	runs := pl.placementPolicies(abiv1.Point_POINT_PLACEMENT_SCORE)
	if len(runs) == 0 || a == nil || a.Placement == nil {
		return 0, nil
	}
	g := pl.placementGroup(info)
	byName := map[string]fwk.NodeInfo{}
	for _, n := range a.Nodes {
		if n != nil && n.Node() != nil {
			byName[n.Node().Name] = n
		}
	}
	var as []policy.Assignment
	for _, pa := range a.ProposedAssignments {
		n := byName[pa.GetNodeName()]
		if n == nil {
			return 0, fwk.AsStatus(fmt.Errorf("pod %s/%s is assigned node %s, outside placement %q", pa.GetPod().Namespace, pa.GetPod().Name, pa.GetNodeName(), a.Name)).WithPlugin(Name)
		}
		as = append(as, policy.Assignment{PodUID: string(pa.GetPod().UID), Node: n})
	}
	var total int64
	for _, r := range runs {
		v, s, err := r.version.ScorePlacement(ctx, g, policy.Placement{Name: a.Name, Nodes: a.Nodes}, as)
		if err == nil && !s.IsSuccess() {
			err = fmt.Errorf("%s: %s", policy.CodeName(s.Code), strings.Join(s.Reasons, "; "))
		}
		if err != nil {
			if r.ignore {
				continue
			}
			return 0, fwk.AsStatus(fmt.Errorf("policy %s: placement_score: %w", r.name, err)).WithPlugin(Name)
		}
		total += r.weight * v
	}
	return total, nil
}

// NormalizePlacementScore implements fwk.PlacementScoreExtensions: a
// policy that scores placements alone normalises its scores itself; the
// sums of several are left raw.
func (pl *Plugin) NormalizePlacementScore(ctx context.Context, _ fwk.PodGroupCycleState, info fwk.PodGroupInfo, scores []fwk.PlacementScore) *fwk.Status {
	runs := pl.placementPolicies(abiv1.Point_POINT_PLACEMENT_SCORE)
	if len(runs) != 1 || !runs[0].version.Implements(abiv1.Point_POINT_NORMALIZE_PLACEMENT_SCORE) {
		return nil
	}
	r := runs[0]
	ps := make([]policy.PlacementScore, len(scores))
	for i, s := range scores {
		if s.Placement != nil {
			ps[i].Name = s.Placement.Name
		}
		ps[i].Score = s.Score / r.weight
	}
	st, err := r.version.NormalizePlacementScores(ctx, pl.placementGroup(info), ps)
	if err == nil && !st.IsSuccess() {
		err = fmt.Errorf("%s: %s", policy.CodeName(st.Code), strings.Join(st.Reasons, "; "))
	}
	if err != nil {
		if r.ignore {
			return nil
		}
		return fwk.AsStatus(fmt.Errorf("policy %s: normalize_placement_score: %w", r.name, err)).WithPlugin(Name)
	}
	for i := range scores {
		scores[i].Score = r.weight * ps[i].Score
	}
	return nil
}

// PlacementScoreExtensions implements fwk.PlacementScorePlugin.
func (pl *Plugin) PlacementScoreExtensions() fwk.PlacementScoreExtensions { return pl }

// groupEvents are the pod-group events that may let a pending member of a
// group fit: its PodGroup created or changed (a lower minCount, another
// topology constraint). A member arriving is a pod Add, which the
// plugin's pod events cover. The scheduler watches PodGroups only with
// the GenericWorkload gate on.
func (pl *Plugin) groupEvents() []fwk.ClusterEventWithHint {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.PodGroup, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: hintGroupChanged},
	}
}

// hintGroupChanged queues a pod whose PodGroup the event is about.
func hintGroupChanged(_ klog.Logger, pod *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	obj, ok := newObj.(metav1.Object)
	if !ok {
		return fwk.Queue, nil
	}
	if name := convert.PodGroupName(pod); name != "" && name == obj.GetName() && pod.Namespace == obj.GetNamespace() {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}
