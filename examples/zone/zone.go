package main

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/wasmsched/wasmsched/guest"
)

// Settings are the operator's settings; DefaultSettings gives the values
// used for fields the operator leaves out.
type Settings struct {
	// DeniedZones are zones no pod may be placed in.
	DeniedZones []string `json:"deniedZones"`
	// GroupLabel is the pod label whose value names a spreading group.
	GroupLabel string `json:"groupLabel"`
	// MaxSkew bounds how many more pods of a group one zone may hold than
	// the zone holding the fewest.
	MaxSkew int `json:"maxSkew"`
	// RequireZone rejects nodes without a zone label.
	RequireZone bool `json:"requireZone"`
}

// DefaultSettings returns the settings of an operator who configured nothing.
func DefaultSettings() Settings {
	return Settings{DeniedZones: []string{}, GroupLabel: "app", MaxSkew: 1}
}

// Policy is the validated configuration. It holds no per-cycle data, so one
// value serves every cycle of an instance.
type Policy struct {
	denied      map[string]bool
	groupLabel  string
	maxSkew     int
	requireZone bool
}

// New validates s and builds the policy. Errors name the offending field.
func New(s Settings) (*Policy, error) {
	if s.GroupLabel == "" {
		return nil, errors.New(`settings: "groupLabel" must not be empty`)
	}
	if s.MaxSkew < 1 {
		return nil, errors.New(`settings: "maxSkew" must be at least 1, got ` + strconv.Itoa(s.MaxSkew))
	}
	p := &Policy{
		denied:      make(map[string]bool, len(s.DeniedZones)),
		groupLabel:  s.GroupLabel,
		maxSkew:     s.MaxSkew,
		requireZone: s.RequireZone,
	}
	for _, z := range s.DeniedZones {
		if z == "" {
			return nil, errors.New(`settings: "deniedZones" contains an empty zone name`)
		}
		p.denied[z] = true
	}
	return p, nil
}

// cycleState is what PreFilter computes for one cycle and Filter and Score
// read.
type cycleState struct {
	// spread is nil when the pod carries no group label.
	spread *spread
}

// spread is the pod's group and where its members already run.
type spread struct {
	// group is the pod's value of the group label.
	group string
	// zones are the spreading domains, sorted: the allowed zones holding at
	// least one node the pod's node selector and required affinity admit.
	zones []string
	// counts is, per domain, how many pods of the group (same namespace,
	// same group-label value) run on its eligible nodes.
	counts map[string]int
	// byNode is each eligible node's share of counts and the generation it
	// was counted at, so that Filter can correct for a node handed to it in
	// another state (preemption removes victims, nominated pods are added).
	byNode map[string]share
}

// share is one node's part of its zone's count.
type share struct {
	generation int64
	count      int
}

// prepare computes the state of cycle c: its pod's group and how many of
// the group run in each zone, over the nodes c.EachNode gives (the
// instance's snapshot, whole and current since the policy sets
// WantsAllNodes; in a native test, the nodes the test gave).
func (p *Policy) prepare(c *guest.Cycle) *cycleState {
	pod := c.Pod
	group, ok := pod.Label(p.groupLabel)
	if !ok {
		return &cycleState{}
	}
	sp := &spread{group: group, counts: map[string]int{}, byNode: map[string]share{}}
	c.EachNode(func(n *guest.NodeInfo) bool {
		z := n.Zone()
		if z == "" || p.denied[z] || !n.MatchesNodeSelector(pod) {
			return true
		}
		if _, seen := sp.counts[z]; !seen {
			sp.zones = append(sp.zones, z)
		}
		count := p.members(pod, group, n)
		sp.counts[z] += count
		sp.byNode[n.Name()] = share{generation: n.Generation(), count: count}
		return true
	})
	slices.Sort(sp.zones)
	return &cycleState{spread: sp}
}

// members counts the pods on n in pod's namespace whose group label has the
// value group, pod itself excluded.
func (p *Policy) members(pod *guest.Pod, group string, n *guest.NodeInfo) int {
	c := 0
	for _, s := range n.Pods() {
		if s.GetNamespace() != pod.Namespace() || s.GetUid() == pod.UID() {
			continue
		}
		if v, ok := guest.Lookup(s.GetLabels(), p.groupLabel); ok && v == group {
			c++
		}
	}
	return c
}

// countsFor returns the per-domain counts as they stand with n in the state
// the call received it. Every change to a node gives it a new generation, so
// the cycle's counts serve unless n's generation differs from the one
// PreFilter counted; only then are n's pods counted again.
func (p *Policy) countsFor(pod *guest.Pod, sp *spread, n *guest.NodeInfo) map[string]int {
	before, ok := sp.byNode[n.Name()]
	if !ok || before.generation == n.Generation() {
		return sp.counts
	}
	now := p.members(pod, sp.group, n)
	if now == before.count {
		return sp.counts
	}
	counts := maps.Clone(sp.counts)
	counts[n.Zone()] += now - before.count
	return counts
}

// Sign lets the scheduler batch pods outside groups, whose verdicts depend
// on the node alone. A group's pods are never batched: each placement
// changes the counts every node of its zone is judged by.
func (p *Policy) Sign(pod *guest.Pod) ([]byte, bool) {
	if _, ok := pod.Label(p.groupLabel); ok {
		return nil, false
	}
	return nil, true
}

// PreFilter counts the pod's group per zone, once per cycle.
func (p *Policy) PreFilter(c *guest.Cycle) guest.Status {
	c.State = p.prepare(c)
	return guest.OK()
}

// state returns the cycle's state, or an error status when PreFilter did
// not leave one.
func state(c *guest.Cycle) (*cycleState, guest.Status) {
	st, ok := c.State.(*cycleState)
	if !ok {
		return nil, guest.Errorf("zone: no cycle state: PreFilter did not run")
	}
	return st, guest.OK()
}

// Filter rejects nodes in denied zones, nodes without a zone when zones are
// required, and zones that would exceed maxSkew for the pod's group.
func (p *Policy) Filter(c *guest.Cycle, n *guest.NodeInfo) guest.Status {
	z := n.Zone()
	if z == "" {
		if p.requireZone {
			return guest.RejectUnresolvable("zone: node %s has no %s label", n.Name(), guest.LabelZone)
		}
		return guest.OK()
	}
	if p.denied[z] {
		return guest.RejectUnresolvable("zone: zone %s is denied", z)
	}
	st, s := state(c)
	if !s.IsSuccess() || st.spread == nil {
		return s
	}
	sp := st.spread
	if _, ok := sp.counts[z]; !ok {
		// No node of the zone admits the pod: NodeAffinity rejects it.
		return guest.OK()
	}
	counts := p.countsFor(c.Pod, sp, n)
	lo := counts[z]
	for _, d := range sp.zones {
		lo = min(lo, counts[d])
	}
	if skew := counts[z] + 1 - lo; skew > p.maxSkew {
		return guest.Reject("zone: placing %s=%s in zone %s would make skew %d > maxSkew %d (%s)",
			p.groupLabel, sp.group, z, skew, p.maxSkew, formatCounts(sp.zones, counts))
	}
	return guest.OK()
}

// noZone is the raw score of a node outside every domain; NormalizeScore
// turns it into 0.
const noZone = -1

// Score returns, for a grouped pod, how many of its group the node's zone
// holds (noZone outside the domains); NormalizeScore turns fewest into 100.
func (p *Policy) Score(c *guest.Cycle, n *guest.NodeInfo) (int64, guest.Status) {
	st, s := state(c)
	if !s.IsSuccess() || st.spread == nil {
		return 0, s
	}
	sp := st.spread
	z := n.Zone()
	if _, ok := sp.counts[z]; !ok {
		return noZone, guest.OK()
	}
	return int64(p.countsFor(c.Pod, sp, n)[z]), guest.OK()
}

// NormalizeScore maps the counts onto 0..100 over the feasible nodes: the
// fewest pods of the group score 100, the most 0, nodes outside every
// domain 0. Pods without the group label score 0 everywhere.
func (p *Policy) NormalizeScore(c *guest.Cycle, scores []guest.NodeScore) guest.Status {
	st, s := state(c)
	if !s.IsSuccess() {
		return s
	}
	if st.spread == nil {
		for i := range scores {
			scores[i].Score = 0
		}
		return guest.OK()
	}
	lo, hi := int64(-1), int64(-1)
	for _, sc := range scores {
		if sc.Score == noZone {
			continue
		}
		if lo < 0 || sc.Score < lo {
			lo = sc.Score
		}
		hi = max(hi, sc.Score)
	}
	for i, sc := range scores {
		switch {
		case sc.Score == noZone:
			scores[i].Score = 0
		case hi == lo:
			scores[i].Score = 100
		default:
			scores[i].Score = (hi - sc.Score) * 100 / (hi - lo)
		}
	}
	return guest.OK()
}

// maxListedZones bounds the zones a rejection lists, so that a cluster with
// many zones does not flood events.
const maxListedZones = 8

// formatCounts lists "zone=count" in zone order.
func formatCounts(zones []string, counts map[string]int) string {
	var b strings.Builder
	for i, z := range zones {
		if i == maxListedZones {
			b.WriteString(", and " + strconv.Itoa(len(zones)-i) + " more")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(z + "=" + strconv.Itoa(counts[z]))
	}
	return b.String()
}
