package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/wasmsched/wasmsched/guest"
)

// Name is the policy's name; every reason starts with it.
const Name = "topology"

// The node labels the policy knows.
const (
	// LabelClique is the NVLink domain GPU Feature Discovery writes on
	// nodes with multi-node NVLink (GB200 NVL72 and its kind).
	LabelClique = "nvidia.com/gpu.clique"
	// ResourceGPU is the extended resource the gang's pods request.
	ResourceGPU = "nvidia.com/gpu"
)

// Settings are the operator's settings, as JSON:
//
//	{"topologyKey": "example.com/rack", "allowSplit": false}
type Settings struct {
	// TopologyKey is the node label whose values are the domains, for
	// groups whose PodGroup has no topology constraint of its own (which
	// wins when it has one). Default nvidia.com/gpu.clique.
	TopologyKey string `json:"topologyKey"`
	// AllowSplit lets a gang that fits no single domain be placed across
	// several, the fewest that hold it. Default false: such a gang stays
	// pending with the reason.
	AllowSplit bool `json:"allowSplit"`
	// Resource is the resource the domains are measured in. Default
	// nvidia.com/gpu.
	Resource string `json:"resource"`
	// MaxPlacements is the most domains proposed in one group cycle, the
	// tightest first. The scheduler tries the whole group on each, so at
	// thousands of nodes it bounds the cycle's cost. Default 32; 1 to
	// MaxPlacementsBound.
	MaxPlacements int `json:"maxPlacements"`
}

// MaxPlacementsBound is the most placements WasmPolicy accepts from one
// PlacementGenerate call.
const MaxPlacementsBound = 256

// DefaultSettings returns the settings used where the operator gives none.
func DefaultSettings() Settings {
	return Settings{TopologyKey: LabelClique, Resource: ResourceGPU, MaxPlacements: 32}
}

// Policy is the policy built from valid settings.
type Policy struct {
	s Settings
	// last is the last Generate's parent nodes grouped into domains, kept
	// for the next call while its nodes have the same labels and
	// allocatable amounts, which make the grouping: the scheduler sends
	// the same nodes with every gang, and they change far less often than
	// the pods on them. Only the room is counted in each call.
	last *grouping
}

// New checks the settings and builds the policy.
func New(s Settings) (*Policy, error) {
	if strings.TrimSpace(s.TopologyKey) == "" {
		return nil, errors.New(`settings: "topologyKey" must name a node label`)
	}
	if s.Resource == "" {
		return nil, errors.New(`settings: "resource" must name a resource`)
	}
	if s.MaxPlacements < 1 || s.MaxPlacements > MaxPlacementsBound {
		return nil, fmt.Errorf(`settings: "maxPlacements" is %d; want 1 to %d`, s.MaxPlacements, MaxPlacementsBound)
	}
	return &Policy{s: s}, nil
}

// key is the label whose values are the group's domains.
func (p *Policy) key(g *guest.Group) string {
	if g.PodGroup != nil {
		if ks := g.PodGroup.TopologyKeys(); len(ks) > 0 {
			return ks[0]
		}
	}
	return p.s.TopologyKey
}

// need is how many of the group's pods must be placed together: a gang's
// minCount, every pod of a basic group.
func need(g *guest.Group) int {
	if g.PodGroup != nil && g.PodGroup.IsGang() && g.PodGroup.MinCount() > 0 {
		return min(g.PodGroup.MinCount(), len(g.Pods))
	}
	return len(g.Pods)
}

// perPod is the largest request of the resource among the group's pods:
// the domains' room is counted in pods of that size.
func (p *Policy) perPod(g *guest.Group) int64 {
	var r int64
	for _, pod := range g.Pods {
		r = max(r, pod.Request(p.s.Resource))
	}
	return r
}

// domain is the nodes sharing one value of the key.
type domain struct {
	value string
	nodes []*guest.NodeInfo
	room  int // pods of perPod that fit on its nodes, node by node
}

// grouping is a list of nodes grouped by a key's values: each domain's
// value, capacity and the positions of its nodes in the list, in order of
// first appearance, and the same domains the tightest first (the least
// capacity, then by value). Nodes without the label belong to none.
type grouping struct {
	key     string
	nodes   []*guest.NodeInfo
	domains []domainAt
	tight   []int // indexes into domains
}

// domainAt is a domain of a grouping, its nodes by position.
type domainAt struct {
	value    string
	at       []int32
	capacity int64
}

// group groups nodes by the key's values.
func (p *Policy) group(key string, nodes []*guest.NodeInfo) *grouping {
	gr := &grouping{key: key, nodes: nodes}
	idx := map[string]int{}
	for i, n := range nodes {
		v, ok := n.Label(key)
		if !ok || v == "" {
			continue
		}
		d, seen := idx[v]
		if !seen {
			d = len(gr.domains)
			idx[v] = d
			gr.domains = append(gr.domains, domainAt{value: v})
		}
		gr.domains[d].at = append(gr.domains[d].at, int32(i))
		gr.domains[d].capacity += n.Allocatable(p.s.Resource)
	}
	gr.tight = make([]int, len(gr.domains))
	for i := range gr.tight {
		gr.tight[i] = i
	}
	slices.SortFunc(gr.tight, func(a, b int) int {
		da, db := &gr.domains[a], &gr.domains[b]
		if da.capacity != db.capacity {
			return cmp.Compare(da.capacity, db.capacity)
		}
		return strings.Compare(da.value, db.value)
	})
	return gr
}

// grouped is the grouping of nodes by key: the last call's, with this
// call's views of the nodes in it, when each node has the key's value and
// the allocatable resource of the node at its place then; else a new one.
// A node that is the same node object as then (usage updates only) is not
// read: in a cluster whose nodes rarely change that is all of them.
func (p *Policy) grouped(key string, nodes []*guest.NodeInfo) *grouping {
	if gr := p.last; gr != nil && gr.key == key && len(gr.nodes) == len(nodes) {
		same := true
		for i, n := range nodes {
			if old := gr.nodes[i]; !n.SameObject(old) && !p.groupedAlike(key, n, old) {
				same = false
				break
			}
		}
		if same {
			gr.nodes = nodes
			return gr
		}
	}
	p.last = p.group(key, nodes)
	return p.last
}

// groupedAlike reports whether two nodes have the same value of the key
// and the same allocatable resource: whether one can take the other's
// place in a grouping (a node whose status or annotations changed can).
func (p *Policy) groupedAlike(key string, n, m *guest.NodeInfo) bool {
	v, _ := n.Label(key)
	w, _ := m.Label(key)
	return v == w && n.Allocatable(p.s.Resource) == m.Allocatable(p.s.Resource)
}

// room is how many pods of perPod fit on a domain's nodes, node by node
// (by pod count when the group requests none of the resource).
func (p *Policy) room(gr *grouping, d *domainAt, perPod int64) int {
	room := 0
	for _, i := range d.at {
		n := gr.nodes[i]
		if perPod > 0 {
			room += int(n.Free(p.s.Resource) / perPod)
		} else {
			room += int(n.Allocatable("pods") - n.Requested("pods"))
		}
	}
	return room
}

// domains are a grouping's domains with their nodes and room, in order of
// first appearance.
func (p *Policy) domains(gr *grouping, perPod int64) []*domain {
	out := make([]*domain, len(gr.domains))
	for i := range gr.domains {
		d := &gr.domains[i]
		out[i] = &domain{value: d.value, nodes: gr.at(d), room: p.room(gr, d, perPod)}
	}
	return out
}

// at is a domain's nodes.
func (gr *grouping) at(d *domainAt) []*guest.NodeInfo {
	nodes := make([]*guest.NodeInfo, len(d.at))
	for i, at := range d.at {
		nodes[i] = gr.nodes[at]
	}
	return nodes
}

// Generate proposes one placement per domain that holds the group, the
// tightest first (least capacity, then name), at most maxPlacements of
// them; with allowSplit and no such domain, one placement over the fewest
// domains that do. Otherwise it rejects the group, saying what it needs
// and what the largest domain has.
func (p *Policy) Generate(g *guest.Group, parent guest.Placement) ([]guest.Placement, guest.Status) {
	key, want, per := p.key(g), need(g), p.perPod(g)
	if want == 0 {
		return nil, guest.Reject("%s: group %s has no pod to place", Name, groupKey(g))
	}
	gr := p.grouped(key, parent.Nodes)
	if len(gr.domains) == 0 {
		return nil, guest.RejectUnresolvable("%s: no node of %d has the label %s", Name, len(parent.Nodes), key)
	}
	if pl, ok := membersDomain(g, gr); ok {
		return []guest.Placement{pl}, guest.OK()
	}
	if fit := p.fitting(gr, per, want, p.s.MaxPlacements); len(fit) > 0 {
		out := make([]guest.Placement, len(fit))
		for i, d := range fit {
			out[i] = guest.Placement{Name: key + "=" + d.value, Nodes: gr.at(d)}
		}
		return out, guest.OK()
	}
	ds := p.domains(gr, per)
	largest := slices.MaxFunc(ds, func(a, b *domain) int { return a.room - b.room })
	if p.s.AllowSplit {
		if pl, ok := split(key, ds, want); ok {
			return []guest.Placement{pl}, guest.OK()
		}
	}
	return nil, guest.Reject("%s: %s needs %d pods%s within one %s domain; the largest, %s, has room for %d (%d domains)",
		Name, groupKey(g), want, p.sized(per), key, largest.value, largest.room, len(ds))
}

// fitting are the domains of gr with room for want pods of perPod, the
// tightest first (the least capacity, then by value), at most limit of
// them: the room of the domains past the limit-th that fits is not
// counted, so that at thousands of nodes most are not read.
func (p *Policy) fitting(gr *grouping, perPod int64, want, limit int) []*domainAt {
	var fit []*domainAt
	for _, i := range gr.tight {
		if len(fit) == limit {
			break
		}
		if d := &gr.domains[i]; p.room(gr, d, perPod) >= want {
			fit = append(fit, d)
		}
	}
	return fit
}

// membersDomain is the placement of the domains the group's scheduled and
// assumed members run in, when there are any: the rest of the group joins
// them (whether it fits there is the scheduler's call).
func membersDomain(g *guest.Group, gr *grouping) (guest.Placement, bool) {
	if g.PodGroup == nil || len(g.PodGroup.MemberNodes()) == 0 {
		return guest.Placement{}, false
	}
	members := g.PodGroup.MemberNodes()
	pl := guest.Placement{}
	var values []string
	for i := range gr.domains {
		d := &gr.domains[i]
		for _, at := range d.at {
			if _, ok := slices.BinarySearch(members, gr.nodes[at].Name()); ok {
				values = append(values, d.value)
				pl.Nodes = append(pl.Nodes, gr.at(d)...)
				break
			}
		}
	}
	if len(values) == 0 {
		return guest.Placement{}, false
	}
	slices.Sort(values)
	pl.Name = gr.key + "=" + strings.Join(values, ",")
	return pl, true
}

// split is one placement over the fewest domains (largest room first) that
// together hold want pods.
func split(key string, ds []*domain, want int) (guest.Placement, bool) {
	sorted := slices.Clone(ds)
	slices.SortStableFunc(sorted, func(a, b *domain) int { return b.room - a.room })
	pl := guest.Placement{}
	var names []string
	room := 0
	for _, d := range sorted {
		if room >= want {
			break
		}
		room += d.room
		names = append(names, d.value)
		pl.Nodes = append(pl.Nodes, d.nodes...)
	}
	pl.Name = key + " in " + strings.Join(names, ",")
	return pl, room >= want
}

func (p *Policy) sized(per int64) string {
	if per == 0 {
		return ""
	}
	return fmt.Sprintf(" × %d %s", per, p.s.Resource)
}

func groupKey(g *guest.Group) string {
	if g.PodGroup == nil {
		return "the group"
	}
	return "gang " + g.PodGroup.Key()
}

// Score prefers the tightest placement: the one whose nodes have the least
// of the resource besides what the group takes (negated, so higher is
// better; Normalize maps it onto 0..100). Placements over several domains
// score lower than any single domain.
func (p *Policy) Score(g *guest.Group, pl *guest.PlacementAssignment) (int64, guest.Status) {
	var capacity int64
	domains := map[string]bool{}
	key := p.key(g)
	for _, n := range pl.Placement.Nodes {
		capacity += n.Allocatable(p.s.Resource)
		v, _ := n.Label(key)
		domains[v] = true
	}
	return -capacity - int64(len(domains)-1)*1_000_000, guest.OK()
}

// Normalize maps the placements' scores onto 0..100.
func (p *Policy) Normalize(_ *guest.Group, scores []guest.PlacementScore) guest.Status {
	if len(scores) == 0 {
		return guest.OK()
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
	return guest.OK()
}

// Explain is PodGroupPostFilter (Kubernetes 1.37): the group's cycle found
// no placement. When Generate turned the group away, its members already
// carry the reason: nothing is added. Otherwise every domain with room was
// tried and members were turned away on its nodes, by the scheduler's
// plugins or other policies (taints, other resources, affinity); Explain
// names those domains, so that the members' status says more than "0/N
// placements are available". It nominates nobody: the policy evicts
// nothing.
func (p *Policy) Explain(g *guest.Group, f *guest.GroupFailure) ([]guest.Nomination, guest.Status) {
	if len(f.Rejection) > 0 {
		return nil, guest.Status{Code: guest.Unschedulable}
	}
	key, want, per := p.key(g), need(g), p.perPod(g)
	if want == 0 {
		return nil, guest.Status{Code: guest.Unschedulable}
	}
	gr := p.group(key, f.Nodes)
	all := p.fitting(gr, per, want, len(gr.domains))
	if len(all) == 0 {
		return nil, guest.Status{Code: guest.Unschedulable}
	}
	tried := all[:min(len(all), p.s.MaxPlacements)]
	fit := make([]string, len(tried))
	for i, d := range tried {
		fit[i] = d.value
	}
	slices.Sort(fit)
	more := ""
	if n := len(all) - len(tried); n > 0 {
		more = fmt.Sprintf("; %d more with room not tried (maxPlacements %d)", n, p.s.MaxPlacements)
	}
	return nil, guest.Reject("%s: %s fit in none of the %d %s domains with room for %d pods%s (%s): members were turned away on their nodes%s",
		Name, groupKey(g), len(fit), key, want, p.sized(per), strings.Join(fit, ", "), more)
}
