//go:build !k8s1.35 && !k8s1.36

package perf

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host/policy"
)

// TopologyNativeName is the topology example's native twin in scheduler
// configurations.
const TopologyNativeName = "TopologyNative"

// TopologyNative is the topology example policy (examples/topology) written
// as an ordinary compiled-in placement plugin (Kubernetes 1.37): it
// proposes one placement per topology domain that holds the whole pod
// group, the tightest first, and scores the tightest highest. It is the
// baseline the Gang workload compares WasmPolicy running the example with;
// TestNativeTopologyTwin checks that both propose, name, score and reject
// alike. A benchmark fixture, not shipped.
//
// One difference, outside what the benchmark exercises: a group no domain
// holds is rejected here with the policy's reason as the status of
// GeneratePlacements, where WasmPolicy keeps the reason in the group's
// cycle state and rejects each member at PreFilter (host/plugin's
// rejectGroup), so that the reason reaches the pods. The Gang workload's
// gangs all fit.
type TopologyNative struct {
	s topologySettings
	h fwk.Handle
	// memberNodes returns the nodes the group's scheduled and assumed
	// members run on, sorted; nil for none. It reads the scheduler's
	// snapshot, as WasmPolicy does for PodGroup.member_nodes.
	memberNodes func(namespace, name string) []string

	// mu guards last, the last GeneratePlacements' parent nodes grouped
	// into domains, kept while the nodes keep their labels and
	// allocatable amounts, as the example keeps it.
	mu   sync.Mutex
	last *nativeGrouping
}

// topologySettings are examples/topology's settings.
type topologySettings struct {
	TopologyKey   string `json:"topologyKey"`
	AllowSplit    bool   `json:"allowSplit"`
	Resource      string `json:"resource"`
	MaxPlacements int    `json:"maxPlacements"`
}

var (
	_ fwk.PlacementGeneratePlugin  = &TopologyNative{}
	_ fwk.PlacementScorePlugin     = &TopologyNative{}
	_ fwk.PlacementScoreExtensions = &TopologyNative{}
)

// NewTopologyNative builds the plugin from the example's settings (JSON,
// optional).
func NewTopologyNative(_ context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	var raw []byte
	switch a := obj.(type) {
	case *runtime.Unknown:
		raw = a.Raw
	case nil:
	default:
		return nil, fmt.Errorf("%s: arguments of type %T, want the topology settings", TopologyNativeName, obj)
	}
	pl, err := newTopologyNative(raw)
	if err != nil {
		return nil, err
	}
	pl.h = h
	pl.memberNodes = pl.snapshotMembers
	return pl, nil
}

func newTopologyNative(raw []byte) (*TopologyNative, error) {
	s := topologySettings{TopologyKey: "nvidia.com/gpu.clique", Resource: resourceGPU, MaxPlacements: 32}
	if len(raw) > 0 {
		d := json.NewDecoder(strings.NewReader(string(raw)))
		d.DisallowUnknownFields()
		if err := d.Decode(&s); err != nil {
			return nil, fmt.Errorf("%s: settings: %w", TopologyNativeName, err)
		}
	}
	if strings.TrimSpace(s.TopologyKey) == "" {
		return nil, errors.New(`settings: "topologyKey" must name a node label`)
	}
	if s.Resource == "" {
		return nil, errors.New(`settings: "resource" must name a resource`)
	}
	if s.MaxPlacements < 1 || s.MaxPlacements > policy.MaxPlacements {
		return nil, fmt.Errorf(`settings: "maxPlacements" is %d; want 1 to %d`, s.MaxPlacements, policy.MaxPlacements)
	}
	return &TopologyNative{s: s, memberNodes: func(string, string) []string { return nil }}, nil
}

func (pl *TopologyNative) Name() string { return TopologyNativeName }

// snapshotMembers reads the group's scheduled and assumed members' nodes
// from the scheduler's snapshot.
func (pl *TopologyNative) snapshotMembers(namespace, name string) []string {
	if pl.h == nil || pl.h.SnapshotSharedLister() == nil {
		return nil
	}
	st, err := pl.h.SnapshotSharedLister().PodGroupStates().Get(namespace, name)
	if err != nil || st == nil {
		return nil
	}
	var out []string
	for _, p := range st.ScheduledPods() {
		if p != nil && p.Spec.NodeName != "" {
			out = append(out, p.Spec.NodeName)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// key is the label whose values are the group's domains: the PodGroup's
// topology constraint, else the settings'.
func (pl *TopologyNative) key(g fwk.PodGroupInfo) string {
	if pg := g.GetPodGroup(); pg != nil && pg.Spec.SchedulingConstraints != nil && len(pg.Spec.SchedulingConstraints.Topology) > 0 {
		return pg.Spec.SchedulingConstraints.Topology[0].Key
	}
	return pl.s.TopologyKey
}

// need is a gang's minCount (at most its pods), or every pod of the group.
func need(g fwk.PodGroupInfo) int {
	pods := len(g.GetUnscheduledPods())
	if pg := g.GetPodGroup(); pg != nil && pg.Spec.SchedulingPolicy.Gang != nil && pg.Spec.SchedulingPolicy.Gang.MinCount > 0 {
		return min(int(pg.Spec.SchedulingPolicy.Gang.MinCount), pods)
	}
	return pods
}

// perPod is the largest request of the resource among the group's pods.
func (pl *TopologyNative) perPod(g fwk.PodGroupInfo) int64 {
	var r int64
	for _, p := range g.GetUnscheduledPods() {
		q := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})[v1.ResourceName(pl.s.Resource)]
		r = max(r, q.Value())
	}
	return r
}

func (pl *TopologyNative) allocatable(ni fwk.NodeInfo) int64 {
	return ni.GetAllocatable().GetScalarResources()[v1.ResourceName(pl.s.Resource)]
}

type nativeDomain struct {
	value string
	nodes []fwk.NodeInfo
	room  int
}

// nativeGrouping is a list of nodes grouped by a key's values, as the
// example's grouping: each domain's value, capacity and its nodes'
// positions, in order of first appearance, and the domains the tightest
// first.
type nativeGrouping struct {
	key     string
	nodes   []fwk.NodeInfo
	domains []nativeDomainAt
	tight   []int
}

type nativeDomainAt struct {
	value    string
	at       []int32
	capacity int64
}

// group groups nodes by the key's values; nodes without the label belong
// to none.
func (pl *TopologyNative) group(key string, nodes []fwk.NodeInfo) *nativeGrouping {
	gr := &nativeGrouping{key: key, nodes: nodes}
	idx := map[string]int{}
	for i, n := range nodes {
		v := n.Node().Labels[key]
		if v == "" {
			continue
		}
		d, seen := idx[v]
		if !seen {
			d = len(gr.domains)
			idx[v] = d
			gr.domains = append(gr.domains, nativeDomainAt{value: v})
		}
		gr.domains[d].at = append(gr.domains[d].at, int32(i))
		gr.domains[d].capacity += pl.allocatable(n)
	}
	gr.tight = make([]int, len(gr.domains))
	for i := range gr.tight {
		gr.tight[i] = i
	}
	slices.SortFunc(gr.tight, func(a, b int) int {
		da, db := &gr.domains[a], &gr.domains[b]
		return cmp.Or(cmp.Compare(da.capacity, db.capacity), strings.Compare(da.value, db.value))
	})
	return gr
}

// grouped is the last call's grouping, with this call's nodes in it, when
// each node has the key's value and allocatable resource of the node at
// its place then (a node whose object is the same, only its pods changed,
// is not read); else a new one.
func (pl *TopologyNative) grouped(key string, nodes []fwk.NodeInfo) *nativeGrouping {
	if gr := pl.last; gr != nil && gr.key == key && len(gr.nodes) == len(nodes) {
		same := true
		for i, n := range nodes {
			old := gr.nodes[i]
			if n.Node() != old.Node() && (n.Node().Labels[key] != old.Node().Labels[key] || pl.allocatable(n) != pl.allocatable(old)) {
				same = false
				break
			}
		}
		if same {
			gr.nodes = nodes
			return gr
		}
	}
	pl.last = pl.group(key, nodes)
	return pl.last
}

// room is how many pods of perPod fit on a domain's nodes, node by node.
func (pl *TopologyNative) room(gr *nativeGrouping, d *nativeDomainAt, perPod int64) int {
	room := 0
	for _, i := range d.at {
		n := gr.nodes[i]
		if perPod > 0 {
			room += int((pl.allocatable(n) - n.GetRequested().GetScalarResources()[v1.ResourceName(pl.s.Resource)]) / perPod)
		} else {
			room += n.GetAllocatable().GetAllowedPodNumber() - len(n.GetPods())
		}
	}
	return room
}

func (gr *nativeGrouping) at(d *nativeDomainAt) []fwk.NodeInfo {
	nodes := make([]fwk.NodeInfo, len(d.at))
	for i, at := range d.at {
		nodes[i] = gr.nodes[at]
	}
	return nodes
}

// domains are the grouping's domains with their nodes and room.
func (pl *TopologyNative) domains(gr *nativeGrouping, perPod int64) []*nativeDomain {
	out := make([]*nativeDomain, len(gr.domains))
	for i := range gr.domains {
		d := &gr.domains[i]
		out[i] = &nativeDomain{value: d.value, nodes: gr.at(d), room: pl.room(gr, d, perPod)}
	}
	return out
}

// GeneratePlacements proposes one placement per domain that holds the
// group, tightest first; the members' domain when members run; with
// allowSplit and no such domain, the fewest domains that together do.
func (pl *TopologyNative) GeneratePlacements(_ context.Context, _ fwk.PodGroupCycleState, g fwk.PodGroupInfo, parent *fwk.Placement) (*fwk.GeneratePlacementsResult, *fwk.Status) {
	pls, reject := pl.generate(g, parent)
	if reject != nil {
		return nil, reject
	}
	for _, p := range pls {
		if parent.Name != "" {
			p.Name = parent.Name + "/" + p.Name
		}
	}
	return &fwk.GeneratePlacementsResult{Placements: pls}, nil
}

func (pl *TopologyNative) generate(g fwk.PodGroupInfo, parent *fwk.Placement) ([]*fwk.Placement, *fwk.Status) {
	key, want, per := pl.key(g), need(g), pl.perPod(g)
	if want == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("topology: %s has no pod to place", groupName(g)))
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	gr := pl.grouped(key, parent.Nodes)
	if len(gr.domains) == 0 {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("topology: no node of %d has the label %s", len(parent.Nodes), key))
	}
	if members := pl.memberNodes(g.GetNamespace(), g.GetName()); len(members) > 0 {
		p := &fwk.Placement{}
		var values []string
		for i := range gr.domains {
			d := &gr.domains[i]
			if slices.ContainsFunc(d.at, func(at int32) bool {
				_, ok := slices.BinarySearch(members, gr.nodes[at].Node().Name)
				return ok
			}) {
				values = append(values, d.value)
				p.Nodes = append(p.Nodes, gr.at(d)...)
			}
		}
		if len(values) > 0 {
			slices.Sort(values)
			p.Name = key + "=" + strings.Join(values, ",")
			return []*fwk.Placement{p}, nil
		}
	}
	// The tightest first, each domain's room counted only until
	// maxPlacements fit.
	var out []*fwk.Placement
	for _, i := range gr.tight {
		if len(out) == pl.s.MaxPlacements {
			break
		}
		if d := &gr.domains[i]; pl.room(gr, d, per) >= want {
			out = append(out, &fwk.Placement{Name: key + "=" + d.value, Nodes: gr.at(d)})
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	ds := pl.domains(gr, per)
	if pl.s.AllowSplit {
		sorted := slices.Clone(ds)
		slices.SortStableFunc(sorted, func(a, b *nativeDomain) int { return b.room - a.room })
		p := &fwk.Placement{}
		var names []string
		room := 0
		for _, d := range sorted {
			if room >= want {
				break
			}
			room += d.room
			names = append(names, d.value)
			p.Nodes = append(p.Nodes, d.nodes...)
		}
		if room >= want {
			p.Name = key + " in " + strings.Join(names, ",")
			return []*fwk.Placement{p}, nil
		}
	}
	largest := slices.MaxFunc(ds, func(a, b *nativeDomain) int { return a.room - b.room })
	sized := ""
	if per > 0 {
		sized = fmt.Sprintf(" × %d %s", per, pl.s.Resource)
	}
	return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("topology: %s needs %d pods%s within one %s domain; the largest, %s, has room for %d (%d domains)",
		groupName(g), want, sized, key, largest.value, largest.room, len(ds)))
}

func groupName(g fwk.PodGroupInfo) string {
	if g.GetPodGroup() == nil {
		return "the group"
	}
	return "gang " + g.GetNamespace() + "/" + g.GetName()
}

// ScorePlacement prefers the placement with the least capacity of the
// resource; one over several domains scores below any single domain.
func (pl *TopologyNative) ScorePlacement(_ context.Context, _ fwk.PlacementCycleState, g fwk.PodGroupInfo, a *fwk.PodGroupAssignments) (int64, *fwk.Status) {
	if a == nil || a.Placement == nil {
		return 0, nil
	}
	var capacity int64
	domains := map[string]bool{}
	key := pl.key(g)
	for _, n := range a.Nodes {
		capacity += pl.allocatable(n)
		domains[n.Node().Labels[key]] = true
	}
	return -capacity - int64(len(domains)-1)*1_000_000, nil
}

// NormalizePlacementScore maps the scores onto 0..100.
func (pl *TopologyNative) NormalizePlacementScore(_ context.Context, _ fwk.PodGroupCycleState, _ fwk.PodGroupInfo, scores []fwk.PlacementScore) *fwk.Status {
	if len(scores) == 0 {
		return nil
	}
	lo, hi := scores[0].Score, scores[0].Score
	for _, s := range scores[1:] {
		lo, hi = min(lo, s.Score), max(hi, s.Score)
	}
	for i := range scores {
		if hi == lo {
			scores[i].Score = 100
			continue
		}
		scores[i].Score = (scores[i].Score - lo) * 100 / (hi - lo)
	}
	return nil
}

// PlacementScoreExtensions implements fwk.PlacementScorePlugin.
func (pl *TopologyNative) PlacementScoreExtensions() fwk.PlacementScoreExtensions { return pl }
