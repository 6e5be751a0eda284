package eval

import (
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/compose"
	"github.com/wasmsched/wasmsched/host/convert"
	"github.com/wasmsched/wasmsched/host/policy"
)

// GroupInput is a pod group to place, with the cluster state.
type GroupInput struct {
	// PodGroup is the group (PodGroupFromObject reads one), Members its
	// pods to place, in the scheduler's order.
	PodGroup *abiv1.PodGroup
	Members  []*v1.Pod
	Nodes    []*v1.Node
	// Pods already placed, as Input.Pods.
	Pods    []*v1.Pod
	Objects []*unstructured.Unstructured
}

// GroupReport is the outcome of a pod-group cycle.
type GroupReport struct {
	PodGroup string `json:"podGroup"`
	// Placements are the placements tried, in the order generated.
	Placements []PlacementResult `json:"placements"`
	// Selected is the placement chosen, "" when none fits (Reasons say
	// why); Assignments the node of each member there, by pod name.
	Selected    string            `json:"selected"`
	Assignments map[string]string `json:"assignments,omitempty"`
	Reasons     []string          `json:"reasons"`
	Failures    []string          `json:"failures,omitempty"`
	// PostFilter is what the policies' PodGroupPostFilter said of a group
	// that fits no placement; nil when none exports it or a placement
	// was chosen. Its reasons are also among Reasons.
	PostFilter *GroupPostFilter `json:"postFilter,omitempty"`
}

// GroupPostFilter is the policies' PodGroupPostFilter verdict on a group
// that fits no placement: Unschedulable (with the reasons of each policy),
// UnschedulableAndUnresolvable, Success (the group can be made to fit,
// Nominated the node of each member nominated, by pod name) or Error.
type GroupPostFilter struct {
	Code      string            `json:"code"`
	Reasons   []string          `json:"reasons"`
	Nominated map[string]string `json:"nominated,omitempty"`
}

// PlacementResult is what a placement gave.
type PlacementResult struct {
	Name  string   `json:"name"`
	Nodes []string `json:"nodes"`
	// Placed are the members placed there (pod name -> node), Feasible
	// whether they are enough (a gang's minCount, every pod of a basic
	// group), Reasons why not.
	Placed   map[string]string `json:"placed"`
	Feasible bool              `json:"feasible"`
	Reasons  []string          `json:"reasons,omitempty"`
	Score    *int64            `json:"score,omitempty"`
}

// reserved is a member's cycle reserved on a node, for Unreserve.
type reserved struct {
	c    *compose.Cycle
	node fwk.NodeInfo
}

// reserve runs Reserve and Permit on the selected node of a member of a
// pod-group cycle; a Wait at Permit counts as placed (the gang's members
// wait for each other). A member stopped there is unreserved at once.
func (e *Evaluator) reserve(ctx context.Context, rep *Report, c *compose.Cycle, ni fwk.NodeInfo) (*Report, *reserved, error) {
	s, _ := c.NodeCall(ctx, abiv1.Point_POINT_RESERVE, ni, nil)
	if s == nil {
		res := c.Permit(ctx, ni, nil)
		s = res.Status
		if s != nil && s.Code == abiv1.Code_CODE_WAIT {
			rep.Permit = Verdict{Code: "Wait", Reasons: nonNil(s.Reasons), Wait: res.Wait.String()}
			return rep, &reserved{c: c, node: ni}, nil
		}
	}
	if s != nil {
		c.NodeCall(ctx, abiv1.Point_POINT_UNRESERVE, ni, nil)
		rep.Permit = Verdict{Code: policy.CodeName(s.Code), Reasons: nonNil(s.Reasons)}
		rep.Selected = ""
		return rep, nil, nil
	}
	rep.Permit = Verdict{Code: "Success", Reasons: []string{}}
	return rep, &reserved{c: c, node: ni}, nil
}

// PodGroupFromObject reads a PodGroup object (scheduling.k8s.io v1alpha2 or
// v1beta1) into its ABI message: the policy (a gang and its minCount), the
// topology keys, the priority and the Workload.
func PodGroupFromObject(u *unstructured.Unstructured) (*abiv1.PodGroup, error) {
	if u.GetKind() != "PodGroup" || !strings.HasPrefix(u.GetAPIVersion(), "scheduling.k8s.io/") {
		return nil, fmt.Errorf("%s %q is not a PodGroup (scheduling.k8s.io)", u.GetKind(), u.GetName())
	}
	if u.GetName() == "" {
		return nil, fmt.Errorf("the PodGroup has no metadata.name")
	}
	m := &abiv1.PodGroup{Namespace: u.GetNamespace(), Name: u.GetName(), Uid: string(u.GetUID()), Policy: "basic"}
	if m.Namespace == "" {
		m.Namespace = "default"
	}
	for _, k := range sortedKeys(u.GetLabels()) {
		m.Labels = append(m.Labels, &abiv1.KeyValue{Key: k, Value: u.GetLabels()[k]})
	}
	if gang, ok, _ := unstructured.NestedMap(u.Object, "spec", "schedulingPolicy", "gang"); ok {
		n, ok := number(gang["minCount"])
		if !ok || n < 1 {
			return nil, fmt.Errorf("PodGroup %s: spec.schedulingPolicy.gang.minCount must be a positive integer", m.Name)
		}
		m.Policy, m.MinCount = "gang", int32(n)
	}
	topo, _, _ := unstructured.NestedSlice(u.Object, "spec", "schedulingConstraints", "topology")
	for i, t := range topo {
		k, _ := t.(map[string]any)["key"].(string)
		if k == "" {
			return nil, fmt.Errorf("PodGroup %s: spec.schedulingConstraints.topology[%d].key is empty", m.Name, i)
		}
		m.TopologyKeys = append(m.TopologyKeys, k)
	}
	if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "priority"); found {
		p, ok := number(v)
		if !ok {
			return nil, fmt.Errorf("PodGroup %s: spec.priority must be an integer", m.Name)
		}
		m.Priority = int32(p)
	}
	m.PriorityClassName, _, _ = unstructured.NestedString(u.Object, "spec", "priorityClassName")
	m.WorkloadName, _, _ = unstructured.NestedString(u.Object, "spec", "workloadRef", "workloadName")
	if m.WorkloadName == "" {
		m.WorkloadName, _, _ = unstructured.NestedString(u.Object, "spec", "podGroupTemplateRef", "workload", "workloadName")
	}
	return m, nil
}

// CheckMembers checks a pod group's members as the scheduler would have
// them: in the PodGroup's namespace, each named once, none naming another
// group (spec.schedulingGroup); a member without a UID gets one
// (uid-<namespace>-<name>), since placement calls name members by UID.
func CheckMembers(pg *abiv1.PodGroup, members []*v1.Pod) error {
	if len(members) == 0 {
		return fmt.Errorf("no member pods")
	}
	seen := map[string]bool{}
	for _, m := range members {
		if m.Namespace == "" {
			m.Namespace = "default"
		}
		switch {
		case m.Namespace != pg.GetNamespace():
			return fmt.Errorf("pod %s is in namespace %s, the PodGroup %s in %s", m.Name, m.Namespace, pg.GetName(), pg.GetNamespace())
		case seen[m.Name]:
			return fmt.Errorf("pod %s is listed twice", m.Name)
		}
		if name := convert.PodGroupName(m); name != "" && name != pg.GetName() {
			return fmt.Errorf("pod %s belongs to PodGroup %s (spec.schedulingGroup), not %s", m.Name, name, pg.GetName())
		}
		seen[m.Name] = true
		if m.UID == "" {
			m.UID = types.UID("uid-" + m.Namespace + "-" + m.Name)
		}
	}
	return nil
}

// number reads an integer as JSON or YAML decoding leaves it.
func number(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case float64:
		return int64(n), n == float64(int64(n))
	}
	return 0, false
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// need is how many members a placement must hold: a gang's minCount,
// every member of a basic group.
func need(pg *abiv1.PodGroup, members int) int {
	if pg.GetPolicy() == "gang" && pg.GetMinCount() > 0 {
		return min(int(pg.GetMinCount()), members)
	}
	return members
}

// EvaluateGroup decides a pod-group cycle as the scheduler of the default
// minor (Kubernetes 1.37) does with the policies as one WasmPolicy plugin
// generating and scoring placements: the policies that export
// PlacementGenerate propose placements (each dividing the placements of
// the one before; all nodes when none does); on each placement the members
// are tried one by one, each cycle seeing the members placed before it,
// through Reserve and Permit (a gang's Wait counts as placed); a placement
// holding enough members is feasible; the policies that export
// PlacementScore score the feasible ones (a policy scoring alone
// normalises its scores) and the highest wins, ties to the first. Every
// Reserve is undone afterwards, the chosen placement's as well: eval binds
// nothing. Only bad input is an error.
func (e *Evaluator) EvaluateGroup(ctx context.Context, in GroupInput) (*GroupReport, error) {
	if in.PodGroup == nil || len(in.Members) == 0 {
		return nil, fmt.Errorf("no pod group to evaluate: a PodGroup and its member pods")
	}
	pg, err := withMembers(in.PodGroup, in.Pods, len(in.Members))
	if err != nil {
		return nil, err
	}
	base := Input{Nodes: in.Nodes, Pods: in.Pods, Objects: in.Objects}
	nodes, err := NodeInfos(base)
	if err != nil {
		return nil, err
	}
	rep := &GroupReport{PodGroup: pg.GetNamespace() + "/" + pg.GetName(), Placements: []PlacementResult{}, Reasons: []string{}}
	g := &policy.Group{PodGroup: pg, Pods: in.Members}

	placements, reasons, rejection, err := e.generate(ctx, g, nodes)
	if err != nil {
		rep.Failures = append(rep.Failures, oneLine(err.Error()))
		rep.Reasons = []string{oneLine(err.Error())}
		return rep, nil
	}
	if len(placements) == 0 {
		rep.Reasons = reasons
		e.postFilter(ctx, g, nodes, []string{rejection}, rep)
		return rep, nil
	}
	want := need(pg, len(in.Members))
	var undo []*reserved
	defer func() {
		for _, r := range undo {
			r.c.NodeCall(ctx, abiv1.Point_POINT_UNRESERVE, r.node, nil)
		}
	}()
	var feasible []int
	for _, pl := range placements {
		res := PlacementResult{Name: pl.Name, Placed: map[string]string{}}
		var plNodes []*v1.Node
		for _, n := range pl.Nodes {
			res.Nodes = append(res.Nodes, n.Node().Name)
			plNodes = append(plNodes, n.Node())
		}
		placed := append([]*v1.Pod(nil), in.Pods...)
		for _, m := range in.Members {
			memberIn := Input{Pod: m, Nodes: plNodes, Pods: onNodes(placed, res.Nodes), Objects: in.Objects,
				group: pg, groupCycle: &abiv1.GroupCycle{Placement: pl.Name}}
			mrep, r, err := e.evaluate(ctx, memberIn)
			if err != nil {
				return nil, err
			}
			rep.Failures = append(rep.Failures, mrep.Failures...)
			if r == nil {
				res.Reasons = append(res.Reasons, fmt.Sprintf("%s: %s", m.Name, memberReason(mrep)))
				continue
			}
			undo = append(undo, r)
			res.Placed[m.Name] = mrep.Selected
			a := m.DeepCopy()
			a.Spec.NodeName = mrep.Selected
			placed = append(placed, a)
		}
		res.Feasible = len(res.Placed) >= want
		if !res.Feasible {
			res.Reasons = append([]string{fmt.Sprintf("%d of %d members placed, %d needed", len(res.Placed), len(in.Members), want)}, res.Reasons...)
		} else {
			feasible = append(feasible, len(rep.Placements))
		}
		rep.Placements = append(rep.Placements, res)
	}
	if len(feasible) == 0 {
		rep.Reasons = []string{fmt.Sprintf("0/%d placements are available", len(placements))}
		e.postFilter(ctx, g, nodes, nil, rep)
		return rep, nil
	}
	best := feasible[0]
	if len(feasible) > 1 {
		scores, err := e.scorePlacements(ctx, g, placements, rep, feasible)
		if err != nil {
			rep.Failures = append(rep.Failures, oneLine(err.Error()))
			rep.Reasons = []string{oneLine(err.Error())}
			return rep, nil
		}
		for k, i := range feasible {
			v := scores[k]
			rep.Placements[i].Score = &v
			if v > *rep.Placements[best].Score {
				best = i
			}
		}
	}
	rep.Selected = rep.Placements[best].Name
	rep.Assignments = rep.Placements[best].Placed
	return rep, nil
}

// withMembers is a copy of pg with the scheduler's counts as the placed
// pods give them: the members among them are scheduled, on their nodes;
// pending ones are those the cycle places.
func withMembers(pg *abiv1.PodGroup, placed []*v1.Pod, pending int) (*abiv1.PodGroup, error) {
	b, err := pg.MarshalVT()
	if err != nil {
		return nil, err
	}
	out := &abiv1.PodGroup{}
	if err := out.UnmarshalVT(b); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	out.Scheduled, out.Pending, out.MemberNodes = 0, int32(pending), nil
	for _, p := range placed {
		if p.Namespace != pg.GetNamespace() || convert.PodGroupName(p) != pg.GetName() {
			continue
		}
		out.Scheduled++
		if !seen[p.Spec.NodeName] {
			seen[p.Spec.NodeName] = true
			out.MemberNodes = append(out.MemberNodes, p.Spec.NodeName)
		}
	}
	sort.Strings(out.MemberNodes)
	return out, nil
}

// onNodes keeps the pods placed on the named nodes.
func onNodes(pods []*v1.Pod, names []string) []*v1.Pod {
	in := map[string]bool{}
	for _, n := range names {
		in[n] = true
	}
	var out []*v1.Pod
	for _, p := range pods {
		if in[p.Spec.NodeName] {
			out = append(out, p)
		}
	}
	return out
}

// memberReason says why a member was not placed.
func memberReason(r *Report) string {
	if r.Error != "" {
		return r.Error
	}
	if r.Selected == "" && r.Permit.Code != "" && r.Permit.Code != "Skip" {
		return r.Permit.Code + ": " + strings.Join(r.Permit.Reasons, "; ")
	}
	seen := map[string]bool{}
	var out []string
	for _, n := range r.Nodes {
		for _, s := range n.Reasons {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	if len(out) == 0 {
		return "no node fits"
	}
	return strings.Join(out, "; ")
}

// generate runs the policies' PlacementGenerate as the plugin does: a
// rejection returns no placement, the reasons and the rejection as the
// plugin hands it to PodGroupPostFilter; a failure is an error.
func (e *Evaluator) generate(ctx context.Context, g *policy.Group, nodes []fwk.NodeInfo) ([]policy.Placement, []string, string, error) {
	current := []policy.Placement{{Nodes: nodes}}
	for i, p := range e.policies {
		if !p.Implements(abiv1.Point_POINT_PLACEMENT_GENERATE) {
			continue
		}
		ignore := e.specs[i].FailurePolicy == FailurePolicyIgnore
		var next []policy.Placement
		var reasons []string
		for _, in := range current {
			pls, s, err := p.GeneratePlacements(ctx, g, in)
			if err == nil && s.Code == abiv1.Code_CODE_ERROR {
				err = fmt.Errorf("%s", strings.Join(s.Reasons, "; "))
			}
			if err != nil {
				if ignore {
					next = append(next, in)
					continue
				}
				return nil, nil, "", fmt.Errorf("policy %s: placement_generate: %w", p.Name(), err)
			}
			if !s.IsSuccess() {
				reasons = append(reasons, s.Reasons...)
				continue
			}
			for _, pl := range pls {
				if in.Name != "" {
					pl.Name = in.Name + "/" + pl.Name
				}
				next = append(next, pl)
			}
		}
		if len(next) == 0 {
			rejection := fmt.Sprintf("policy %s: %s", p.Name(), strings.Join(reasons, "; "))
			if len(reasons) == 0 {
				reasons = []string{fmt.Sprintf("policy %s proposed no placement", p.Name())}
				rejection = fmt.Sprintf("policy %s proposed no placement for pod group %s/%s", p.Name(), g.PodGroup.GetNamespace(), g.PodGroup.GetName())
			}
			return nil, reasons, rejection, nil
		}
		current = next
	}
	return current, nil, "", nil
}

// postFilter runs the policies' PodGroupPostFilter, in order, as the
// plugin does on Kubernetes 1.37 after a pod-group cycle found no
// placement (eval runs no preemption, which the scheduler tries first):
// Unschedulable adds the policy's reasons and lets the next speak;
// UnschedulableAndUnresolvable and Success end there; a failure is the
// verdict Error, or is passed over under failurePolicy Ignore. rejection
// is the policies' rejection at PlacementGenerate, if any.
func (e *Evaluator) postFilter(ctx context.Context, g *policy.Group, nodes []fwk.NodeInfo, rejection []string, rep *GroupReport) {
	var pf *GroupPostFilter
	for i, p := range e.policies {
		if !p.Implements(abiv1.Point_POINT_POD_GROUP_POST_FILTER) {
			continue
		}
		if pf == nil {
			pf = &GroupPostFilter{Code: "Unschedulable", Reasons: []string{}}
			rep.PostFilter = pf
		}
		noms, s, err := p.PodGroupPostFilter(ctx, g, nodes, rejection)
		if err == nil && s.Code == abiv1.Code_CODE_ERROR {
			err = fmt.Errorf("policy %s: pod_group_post_filter: %s", p.Name(), strings.Join(s.Reasons, "; "))
		}
		if err != nil {
			if e.specs[i].FailurePolicy == FailurePolicyIgnore {
				continue
			}
			msg := oneLine(err.Error())
			pf.Code, pf.Reasons, pf.Nominated = "Error", []string{msg}, nil
			rep.Failures = append(rep.Failures, msg)
			rep.Reasons = append(rep.Reasons, msg)
			return
		}
		for _, r := range s.Reasons {
			said := fmt.Sprintf("policy %s: %s", p.Name(), r)
			pf.Reasons = append(pf.Reasons, said)
			rep.Reasons = append(rep.Reasons, said)
		}
		switch s.Code {
		case abiv1.Code_CODE_SUCCESS:
			pf.Code = "Success"
			for _, n := range noms {
				if pf.Nominated == nil {
					pf.Nominated = map[string]string{}
				}
				pf.Nominated[n.Pod.Name] = n.Node
			}
			return
		case abiv1.Code_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE:
			pf.Code = "UnschedulableAndUnresolvable"
			return
		}
	}
}

// scorePlacements scores the feasible placements as the plugin does.
func (e *Evaluator) scorePlacements(ctx context.Context, g *policy.Group, pls []policy.Placement, rep *GroupReport, feasible []int) ([]int64, error) {
	totals := make([]int64, len(feasible))
	var scorers []int
	for i, p := range e.policies {
		if p.Implements(abiv1.Point_POINT_PLACEMENT_SCORE) {
			scorers = append(scorers, i)
		}
	}
	byUID := map[string]string{}
	for _, m := range g.Pods {
		byUID[m.Name] = string(m.UID)
	}
	for _, i := range scorers {
		p := e.policies[i]
		weight := max(1, e.specs[i].Weight)
		raw := make([]policy.PlacementScore, len(feasible))
		for k, pi := range feasible {
			pl := pls[pi]
			nodeOf := map[string]fwk.NodeInfo{}
			for _, n := range pl.Nodes {
				nodeOf[n.Node().Name] = n
			}
			var as []policy.Assignment
			for pod, node := range rep.Placements[pi].Placed {
				as = append(as, policy.Assignment{PodUID: byUID[pod], Node: nodeOf[node]})
			}
			sort.Slice(as, func(a, b int) bool { return as[a].PodUID < as[b].PodUID })
			v, s, err := p.ScorePlacement(ctx, g, pl, as)
			if err == nil && !s.IsSuccess() {
				err = fmt.Errorf("%s: %s", policy.CodeName(s.Code), strings.Join(s.Reasons, "; "))
			}
			if err != nil {
				if e.specs[i].FailurePolicy == FailurePolicyIgnore {
					continue
				}
				return nil, fmt.Errorf("policy %s: placement_score: %w", p.Name(), err)
			}
			raw[k] = policy.PlacementScore{Name: pl.Name, Score: v}
		}
		if len(scorers) == 1 && p.Implements(abiv1.Point_POINT_NORMALIZE_PLACEMENT_SCORE) {
			s, err := p.NormalizePlacementScores(ctx, g, raw)
			if err == nil && !s.IsSuccess() {
				err = fmt.Errorf("%s: %s", policy.CodeName(s.Code), strings.Join(s.Reasons, "; "))
			}
			if err != nil {
				return nil, fmt.Errorf("policy %s: normalize_placement_score: %w", p.Name(), err)
			}
		}
		for k := range raw {
			totals[k] += weight * raw[k].Score
		}
	}
	return totals, nil
}
