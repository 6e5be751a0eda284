package main

import (
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
type Policy struct{ s Settings }

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
	value    string
	nodes    []*guest.NodeInfo
	room     int   // pods of perPod that fit on its nodes, node by node
	capacity int64 // its allocatable resource
}

// domains groups parent's nodes by the key's value, in order of first
// appearance; nodes without the label belong to none.
func (p *Policy) domains(key string, perPod int64, parent guest.Placement) []*domain {
	var out []*domain
	idx := map[string]*domain{}
	for _, n := range parent.Nodes {
		v, ok := n.Label(key)
		if !ok || v == "" {
			continue
		}
		d := idx[v]
		if d == nil {
			d = &domain{value: v}
			idx[v] = d
			out = append(out, d)
		}
		d.nodes = append(d.nodes, n)
		d.capacity += n.Allocatable(p.s.Resource)
		if perPod > 0 {
			d.room += int(n.Free(p.s.Resource) / perPod)
		} else {
			d.room += int(n.Allocatable("pods") - n.Requested("pods"))
		}
	}
	return out
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
	ds := p.domains(key, per, parent)
	if len(ds) == 0 {
		return nil, guest.RejectUnresolvable("%s: no node of %d has the label %s", Name, len(parent.Nodes), key)
	}
	if pl, ok := membersDomain(g, key, ds); ok {
		return []guest.Placement{pl}, guest.OK()
	}
	fit := fitting(ds, want)
	fit = fit[:min(len(fit), p.s.MaxPlacements)]
	out := make([]guest.Placement, 0, len(fit))
	for _, d := range fit {
		out = append(out, guest.Placement{Name: key + "=" + d.value, Nodes: d.nodes})
	}
	if len(out) > 0 {
		return out, guest.OK()
	}
	largest := slices.MaxFunc(ds, func(a, b *domain) int { return a.room - b.room })
	if p.s.AllowSplit {
		if pl, ok := split(key, ds, want); ok {
			return []guest.Placement{pl}, guest.OK()
		}
	}
	return nil, guest.Reject("%s: %s needs %d pods%s within one %s domain; the largest, %s, has room for %d (%d domains)",
		Name, groupKey(g), want, p.sized(per), key, largest.value, largest.room, len(ds))
}

// fitting are the domains of ds with room for want pods, the tightest
// first: the least capacity, then by value.
func fitting(ds []*domain, want int) []*domain {
	var fit []*domain
	for _, d := range ds {
		if d.room >= want {
			fit = append(fit, d)
		}
	}
	slices.SortStableFunc(fit, func(a, b *domain) int {
		if a.capacity != b.capacity {
			return int(a.capacity - b.capacity)
		}
		return strings.Compare(a.value, b.value)
	})
	return fit
}

// membersDomain is the placement of the domains the group's scheduled and
// assumed members run in, when there are any: the rest of the group joins
// them (whether it fits there is the scheduler's call).
func membersDomain(g *guest.Group, key string, ds []*domain) (guest.Placement, bool) {
	if g.PodGroup == nil || len(g.PodGroup.MemberNodes()) == 0 {
		return guest.Placement{}, false
	}
	members := g.PodGroup.MemberNodes()
	pl := guest.Placement{}
	var values []string
	for _, d := range ds {
		for _, n := range d.nodes {
			if _, ok := slices.BinarySearch(members, n.Name()); ok {
				values = append(values, d.value)
				pl.Nodes = append(pl.Nodes, d.nodes...)
				break
			}
		}
	}
	if len(values) == 0 {
		return guest.Placement{}, false
	}
	slices.Sort(values)
	pl.Name = key + "=" + strings.Join(values, ",")
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
	all := fitting(p.domains(key, per, guest.Placement{Nodes: f.Nodes}), want)
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
