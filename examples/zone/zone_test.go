package main

import (
	"slices"
	"strings"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
)

// kv builds a label list from key, value pairs.
func kv(pairs ...string) []*abiv1.KeyValue {
	var out []*abiv1.KeyValue
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, &abiv1.KeyValue{Key: pairs[i], Value: pairs[i+1]})
	}
	return out
}

func mkPod(ns, name string, labels ...string) *guest.Pod {
	return &guest.Pod{Pod: &abiv1.Pod{Name: name, Namespace: ns, Uid: "uid-" + ns + "-" + name, Labels: kv(labels...)}}
}

func placed(ns, name string, labels ...string) *abiv1.PodSummary {
	return &abiv1.PodSummary{Name: name, Namespace: ns, Uid: "uid-" + ns + "-" + name, Labels: kv(labels...)}
}

// mkNode builds a node at generation 1; an empty zone leaves the zone label
// out. Extra labels come as key, value pairs in labels.
func mkNode(name, zone string, labels []string, pods ...*abiv1.PodSummary) *guest.NodeInfo {
	l := kv(labels...)
	if zone != "" {
		l = append(l, &abiv1.KeyValue{Key: guest.LabelZone, Value: zone})
	}
	return &guest.NodeInfo{NodeInfo: &abiv1.NodeInfo{Generation: 1, Node: &abiv1.Node{Name: name, Labels: l}, Pods: pods, PodCount: int32(len(pods))}}
}

// changed returns n as the scheduler hands out a modified copy: a new
// generation.
func changed(n *guest.NodeInfo) *guest.NodeInfo {
	n.Generation = 2
	return n
}

func mustParse(t *testing.T, raw string) *Policy {
	t.Helper()
	p, err := Parse([]byte(raw))
	if err != nil {
		t.Fatalf("Parse(%s): %v", raw, err)
	}
	return p
}

// cycle starts a cycle for pod the way the guest's PreFilter does, over
// nodes instead of the resident snapshot.
func cycle(p *Policy, pod *guest.Pod, nodes []*guest.NodeInfo) *guest.Cycle {
	return &guest.Cycle{Pod: pod, State: p.prepare(pod, slices.Values(nodes))}
}

// cluster is the scene of most tests: web-1 in zone a, a db pod and a web pod
// of another namespace in b, web pods in the denied zone d and on a node
// without a zone, none in c.
func cluster() []*guest.NodeInfo {
	return []*guest.NodeInfo{
		mkNode("a-1", "a", nil, placed("default", "web-1", "app", "web")),
		mkNode("a-2", "a", nil),
		mkNode("b-1", "b", nil, placed("default", "db-1", "app", "db"), placed("staging", "web-s", "app", "web")),
		mkNode("c-1", "c", nil),
		mkNode("d-1", "d", nil, placed("default", "web-d", "app", "web")),
		mkNode("edge-1", "", nil, placed("default", "web-e", "app", "web")),
	}
}

func TestParseSettings(t *testing.T) {
	p := mustParse(t, "")
	if p.groupLabel != "app" || p.maxSkew != 1 || p.requireZone || len(p.denied) != 0 {
		t.Fatalf("defaults: %+v", p)
	}
	p = mustParse(t, `{"deniedZones": ["z1", "z2"], "groupLabel": "team", "maxSkew": 3, "requireZone": true}`)
	if !p.denied["z1"] || !p.denied["z2"] || p.groupLabel != "team" || p.maxSkew != 3 || !p.requireZone {
		t.Fatalf("parsed: %+v", p)
	}
	for _, tc := range []struct{ raw, want string }{
		{`{"maxSkew": 0}`, `"maxSkew" must be at least 1, got 0`},
		{`{"maxSkew": -2}`, `"maxSkew" must be at least 1, got -2`},
		{`{"groupLabel": ""}`, `"groupLabel" must not be empty`},
		{`{"deniedZones": ["a", ""]}`, `"deniedZones" contains an empty zone name`},
		{`{"deniedZone": ["a"]}`, `unknown field "deniedZone"`},
		{`{"maxSkew": "2"}`, `maxSkew`},
	} {
		_, err := Parse([]byte(tc.raw))
		if err == nil || !strings.HasPrefix(err.Error(), "settings: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v, want an error containing %q", tc.raw, err, tc.want)
		}
	}
}

func TestFilter(t *testing.T) {
	nodes := cluster()
	reject := guest.Reject("zone: placing app=web in zone a would make skew 2 > maxSkew 1 (a=1, b=0, c=0)")
	for _, tc := range []struct {
		name     string
		settings string
		pod      *guest.Pod
		want     map[string]guest.Status
	}{{
		name:     "grouped pod spreads, denied zone rejected, no zone passes",
		settings: `{"deniedZones": ["d"]}`,
		pod:      mkPod("default", "web-2", "app", "web"),
		want: map[string]guest.Status{
			"a-1": reject, "a-2": reject, "b-1": guest.OK(), "c-1": guest.OK(),
			"d-1":    guest.RejectUnresolvable("zone: zone d is denied"),
			"edge-1": guest.OK(),
		},
	}, {
		name:     "requireZone rejects the node without a zone",
		settings: `{"deniedZones": ["d"], "requireZone": true}`,
		pod:      mkPod("default", "web-2", "app", "web"),
		want: map[string]guest.Status{
			"a-1": reject, "b-1": guest.OK(),
			"edge-1": guest.RejectUnresolvable("zone: node edge-1 has no topology.kubernetes.io/zone label"),
		},
	}, {
		name:     "a larger maxSkew admits zone a",
		settings: `{"deniedZones": ["d"], "maxSkew": 2}`,
		pod:      mkPod("default", "web-2", "app", "web"),
		want:     map[string]guest.Status{"a-1": guest.OK(), "a-2": guest.OK()},
	}, {
		name:     "a pod without the group label only meets the zone rules",
		settings: `{"deniedZones": ["d"], "requireZone": true}`,
		pod:      mkPod("default", "tool"),
		want: map[string]guest.Status{
			"a-1": guest.OK(), "a-2": guest.OK(), "b-1": guest.OK(), "c-1": guest.OK(),
			"d-1":    guest.RejectUnresolvable("zone: zone d is denied"),
			"edge-1": guest.RejectUnresolvable("zone: node edge-1 has no topology.kubernetes.io/zone label"),
		},
	}, {
		name:     "another group label counts other pods",
		settings: `{"groupLabel": "team"}`,
		pod:      mkPod("default", "web-2", "app", "web"),
		want:     map[string]guest.Status{"a-1": guest.OK(), "d-1": guest.OK()},
	}, {
		name:     "when d is allowed its pod counts and c is the minimum",
		settings: `{}`,
		pod:      mkPod("default", "web-2", "app", "web"),
		want: map[string]guest.Status{
			"d-1": guest.Reject("zone: placing app=web in zone d would make skew 2 > maxSkew 1 (a=1, b=0, c=0, d=1)"),
			"c-1": guest.OK(),
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustParse(t, tc.settings)
			c := cycle(p, tc.pod, nodes)
			for _, n := range nodes {
				want, ok := tc.want[n.Name()]
				if !ok {
					continue
				}
				if got := p.Filter(c, n); !equalStatus(got, want) {
					t.Errorf("%s: got %+v, want %+v", n.Name(), got, want)
				}
			}
		})
	}
}

func equalStatus(a, b guest.Status) bool {
	return a.Code == b.Code && slices.Equal(a.Reasons, b.Reasons)
}

func TestFilterExcludesThePodItself(t *testing.T) {
	p := mustParse(t, "")
	pod := mkPod("default", "web-1", "app", "web")
	// The pod being scheduled already shows on a-1 (a retried binding):
	// it must not count against itself.
	nodes := []*guest.NodeInfo{
		mkNode("a-1", "a", nil, placed("default", "web-1", "app", "web")),
		mkNode("b-1", "b", nil),
	}
	if s := p.Filter(cycle(p, pod, nodes), nodes[0]); !s.IsSuccess() {
		t.Fatalf("a-1: %+v", s)
	}
}

func TestFilterHonoursNodeSelector(t *testing.T) {
	p := mustParse(t, "")
	pod := mkPod("default", "web-3", "app", "web")
	pod.NodeSelector = kv("disk", "ssd")
	// Zone c has no ssd node, so it can never receive the pod and must not
	// hold the minimum at 0 (which would block a and b for ever).
	nodes := []*guest.NodeInfo{
		mkNode("a-1", "a", []string{"disk", "ssd"}, placed("default", "web-1", "app", "web")),
		mkNode("b-1", "b", []string{"disk", "ssd"}, placed("default", "web-2", "app", "web")),
		mkNode("c-1", "c", []string{"disk", "hdd"}),
	}
	c := cycle(p, pod, nodes)
	if got := c.State.(*cycleState).spread.zones; !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("domains %v, want [a b]", got)
	}
	for _, n := range nodes[:2] {
		if s := p.Filter(c, n); !s.IsSuccess() {
			t.Errorf("%s: %+v", n.Name(), s)
		}
	}
}

func TestFilterSeesTheNodeItIsGiven(t *testing.T) {
	p := mustParse(t, "")
	pod := mkPod("default", "web-9", "app", "web")
	nodes := []*guest.NodeInfo{
		mkNode("a-1", "a", nil, placed("default", "web-1", "app", "web"), placed("default", "web-2", "app", "web")),
		mkNode("b-1", "b", nil, placed("default", "web-3", "app", "web")),
	}
	c := cycle(p, pod, nodes)
	want := guest.Reject("zone: placing app=web in zone a would make skew 2 > maxSkew 1 (a=2, b=1)")
	if s := p.Filter(c, nodes[0]); !equalStatus(s, want) {
		t.Fatalf("a-1: %+v, want %+v", s, want)
	}
	// Preemption evaluates a-1 with web-2 removed as a victim.
	victimGone := mkNode("a-1", "a", nil, placed("default", "web-1", "app", "web"))
	if s := p.Filter(c, victimGone); !equalStatus(s, want) {
		t.Fatalf("a-1 without web-2, same generation: %+v, want the cycle's verdict %+v", s, want)
	}
	if s := p.Filter(c, changed(victimGone)); !s.IsSuccess() {
		t.Fatalf("a-1 without web-2: %+v", s)
	}

	// The scheduler evaluates a node with a nominated pod added.
	nodes = []*guest.NodeInfo{
		mkNode("a-1", "a", nil),
		mkNode("b-1", "b", nil),
		mkNode("c-1", "c", nil, placed("default", "web-1", "app", "web")),
	}
	c = cycle(p, pod, nodes)
	if s := p.Filter(c, nodes[1]); !s.IsSuccess() {
		t.Fatalf("b-1: %+v", s)
	}
	withNominated := changed(mkNode("b-1", "b", nil, placed("default", "web-2", "app", "web")))
	want = guest.Reject("zone: placing app=web in zone b would make skew 2 > maxSkew 1 (a=0, b=1, c=1)")
	if s := p.Filter(c, withNominated); !equalStatus(s, want) {
		t.Fatalf("b-1 with a nominated pod: %+v, want %+v", s, want)
	}
}

func TestScore(t *testing.T) {
	p := mustParse(t, `{"deniedZones": ["d"]}`)
	nodes := []*guest.NodeInfo{
		mkNode("a-1", "a", nil, placed("default", "w1", "app", "web"), placed("default", "w2", "app", "web")),
		mkNode("b-1", "b", nil, placed("default", "w3", "app", "web")),
		mkNode("b-2", "b", nil),
		mkNode("c-1", "c", nil),
		mkNode("edge-1", "", nil),
	}
	scoreAll := func(pod *guest.Pod) []int64 {
		t.Helper()
		c := cycle(p, pod, nodes)
		scores := make([]guest.NodeScore, len(nodes))
		for i, n := range nodes {
			v, s := p.Score(c, n)
			if !s.IsSuccess() {
				t.Fatalf("score %s: %+v", n.Name(), s)
			}
			scores[i] = guest.NodeScore{Node: n, Score: v}
		}
		if s := p.NormalizeScore(c, scores); !s.IsSuccess() {
			t.Fatalf("normalize: %+v", s)
		}
		out := make([]int64, len(scores))
		for i, sc := range scores {
			out[i] = sc.Score
		}
		return out
	}
	if got, want := scoreAll(mkPod("default", "w4", "app", "web")), []int64{0, 50, 50, 100, 0}; !slices.Equal(got, want) {
		t.Errorf("grouped pod: scores %v, want %v", got, want)
	}
	if got, want := scoreAll(mkPod("default", "db", "app", "db")), []int64{100, 100, 100, 100, 0}; !slices.Equal(got, want) {
		t.Errorf("first pod of its group: scores %v, want %v", got, want)
	}
	if got, want := scoreAll(mkPod("default", "tool")), []int64{0, 0, 0, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("ungrouped pod: scores %v, want %v", got, want)
	}
}

func TestWithoutPreFilterState(t *testing.T) {
	p := mustParse(t, "")
	c := &guest.Cycle{Pod: mkPod("default", "web", "app", "web")}
	s := p.Filter(c, mkNode("a-1", "a", nil))
	if s.Code != guest.Error || !strings.HasPrefix(s.Reasons[0], "zone: ") {
		t.Fatalf("Filter without state: %+v", s)
	}
	// Node rules need no state: a zoneless node still passes.
	if s := p.Filter(c, mkNode("edge-1", "", nil)); !s.IsSuccess() {
		t.Fatalf("edge-1: %+v", s)
	}
}

func TestFormatCountsIsBounded(t *testing.T) {
	zones := []string{"z0", "z1", "z2", "z3", "z4", "z5", "z6", "z7", "z8", "z9"}
	counts := map[string]int{"z0": 3}
	got := formatCounts(zones, counts)
	want := "z0=3, z1=0, z2=0, z3=0, z4=0, z5=0, z6=0, z7=0, and 2 more"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
