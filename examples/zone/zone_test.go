package main

import (
	"slices"
	"strings"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
	"github.com/wasmsched/wasmsched/guest/guesttest"
)

// appPod is the pod name of ns, labelled app=<app> unless app is "". A test
// makes it the pod being scheduled (Obj) or one placed on a node (Placed).
func appPod(ns, name, app string) *guesttest.PodWrapper {
	p := guesttest.MakePod().Namespace(ns).Name(name).UID("uid-" + ns + "-" + name)
	if app != "" {
		p.Label("app", app)
	}
	return p
}

// zoneNode is node name in zone ("" for a node without a zone label), at
// generation 1, with pods placed on it.
func zoneNode(name, zone string, pods ...*abiv1.PodSummary) *guesttest.NodeWrapper {
	n := guesttest.MakeNode().Name(name).Generation(1).Pods(pods...)
	if zone != "" {
		n.Label(guest.LabelZone, zone)
	}
	return n
}

// mustParse builds the policy from settings as the Settings hook does.
func mustParse(t *testing.T, raw string) *Policy {
	t.Helper()
	return guesttest.Load(t, raw, DefaultSettings(), New)
}

// cycle starts a cycle of pod over nodes and runs PreFilter, as the guest
// does over its snapshot.
func cycle(t *testing.T, p *Policy, pod *guest.Pod, nodes []*guest.NodeInfo) *guest.Cycle {
	t.Helper()
	c := guesttest.NewCycle(pod, nodes...)
	guesttest.CheckStatus(t, p.PreFilter(c), guest.OK())
	return c
}

// cluster is the scene of most tests: web-1 in zone a, a db pod and a web pod
// of another namespace in b, web pods in the denied zone d and on a node
// without a zone, none in c.
func cluster() []*guest.NodeInfo {
	return []*guest.NodeInfo{
		zoneNode("a-1", "a", appPod("default", "web-1", "web").Placed()).Obj(),
		zoneNode("a-2", "a").Obj(),
		zoneNode("b-1", "b", appPod("default", "db-1", "db").Placed(), appPod("staging", "web-s", "web").Placed()).Obj(),
		zoneNode("c-1", "c").Obj(),
		zoneNode("d-1", "d", appPod("default", "web-d", "web").Placed()).Obj(),
		zoneNode("edge-1", "", appPod("default", "web-e", "web").Placed()).Obj(),
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
		_, err := guest.Load([]byte(tc.raw), DefaultSettings(), New)
		if err == nil || !strings.HasPrefix(err.Error(), "settings: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("guest.Load(%s) = %v, want an error containing %q", tc.raw, err, tc.want)
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
		pod:      appPod("default", "web-2", "web").Obj(),
		want: map[string]guest.Status{
			"a-1": reject, "a-2": reject, "b-1": guest.OK(), "c-1": guest.OK(),
			"d-1":    guest.RejectUnresolvable("zone: zone d is denied"),
			"edge-1": guest.OK(),
		},
	}, {
		name:     "requireZone rejects the node without a zone",
		settings: `{"deniedZones": ["d"], "requireZone": true}`,
		pod:      appPod("default", "web-2", "web").Obj(),
		want: map[string]guest.Status{
			"a-1": reject, "b-1": guest.OK(),
			"edge-1": guest.RejectUnresolvable("zone: node edge-1 has no topology.kubernetes.io/zone label"),
		},
	}, {
		name:     "a larger maxSkew admits zone a",
		settings: `{"deniedZones": ["d"], "maxSkew": 2}`,
		pod:      appPod("default", "web-2", "web").Obj(),
		want:     map[string]guest.Status{"a-1": guest.OK(), "a-2": guest.OK()},
	}, {
		name:     "a pod without the group label only meets the zone rules",
		settings: `{"deniedZones": ["d"], "requireZone": true}`,
		pod:      appPod("default", "tool", "").Obj(),
		want: map[string]guest.Status{
			"a-1": guest.OK(), "a-2": guest.OK(), "b-1": guest.OK(), "c-1": guest.OK(),
			"d-1":    guest.RejectUnresolvable("zone: zone d is denied"),
			"edge-1": guest.RejectUnresolvable("zone: node edge-1 has no topology.kubernetes.io/zone label"),
		},
	}, {
		name:     "another group label counts other pods",
		settings: `{"groupLabel": "team"}`,
		pod:      appPod("default", "web-2", "web").Obj(),
		want:     map[string]guest.Status{"a-1": guest.OK(), "d-1": guest.OK()},
	}, {
		name:     "when d is allowed its pod counts and c is the minimum",
		settings: `{}`,
		pod:      appPod("default", "web-2", "web").Obj(),
		want: map[string]guest.Status{
			"d-1": guest.Reject("zone: placing app=web in zone d would make skew 2 > maxSkew 1 (a=1, b=0, c=0, d=1)"),
			"c-1": guest.OK(),
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustParse(t, tc.settings)
			c := cycle(t, p, tc.pod, nodes)
			for _, n := range nodes {
				if want, ok := tc.want[n.Name()]; ok {
					t.Run(n.Name(), func(t *testing.T) { guesttest.CheckStatus(t, p.Filter(c, n), want) })
				}
			}
		})
	}
}

// TestTestdata runs PreFilter and Filter natively on what testdata/ holds
// (the pod of pod.yaml, the nodes of nodes.yaml with the pods of pods.yaml
// placed on them) under testdata/settings.json, as wasm_test.go's
// TestEvalTestdata runs the module.
func TestTestdata(t *testing.T) {
	p := mustParse(t, guesttest.ReadSettings(t, "testdata/settings.json"))
	nodes := guesttest.ReadNodes(t, "testdata/nodes.yaml", guesttest.ReadPods(t, "testdata/pods.yaml")...)
	c := cycle(t, p, guesttest.ReadPod(t, "testdata/pod.yaml"), nodes)
	skewA := guest.Reject("zone: placing app=web in zone a would make skew 2 > maxSkew 1 (a=1, b=0, c=0)")
	for name, want := range map[string]guest.Status{
		"a-1": skewA, "a-2": skewA, "b-1": guest.OK(), "c-1": guest.OK(),
		"d-1":    guest.RejectUnresolvable("zone: zone d is denied"),
		"edge-1": guest.OK(),
	} {
		t.Run(name, func(t *testing.T) { guesttest.CheckStatus(t, p.Filter(c, c.NodeByName(name)), want) })
	}
}

func TestFilterExcludesThePodItself(t *testing.T) {
	p := mustParse(t, "")
	pod := appPod("default", "web-1", "web").Obj()
	// The pod being scheduled already shows on a-1 (a retried binding):
	// it must not count against itself.
	nodes := []*guest.NodeInfo{
		zoneNode("a-1", "a", appPod("default", "web-1", "web").Placed()).Obj(),
		zoneNode("b-1", "b").Obj(),
	}
	if s := p.Filter(cycle(t, p, pod, nodes), nodes[0]); !s.IsSuccess() {
		t.Fatalf("a-1: %+v", s)
	}
}

func TestFilterHonoursNodeSelector(t *testing.T) {
	p := mustParse(t, "")
	pod := appPod("default", "web-3", "web").NodeSelector(map[string]string{"disk": "ssd"}).Obj()
	// Zone c has no ssd node, so it can never receive the pod and must not
	// hold the minimum at 0 (which would block a and b for ever).
	nodes := []*guest.NodeInfo{
		zoneNode("a-1", "a", appPod("default", "web-1", "web").Placed()).Label("disk", "ssd").Obj(),
		zoneNode("b-1", "b", appPod("default", "web-2", "web").Placed()).Label("disk", "ssd").Obj(),
		zoneNode("c-1", "c").Label("disk", "hdd").Obj(),
	}
	c := cycle(t, p, pod, nodes)
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
	pod := appPod("default", "web-9", "web").Obj()
	nodes := []*guest.NodeInfo{
		zoneNode("a-1", "a", appPod("default", "web-1", "web").Placed(), appPod("default", "web-2", "web").Placed()).Obj(),
		zoneNode("b-1", "b", appPod("default", "web-3", "web").Placed()).Obj(),
	}
	c := cycle(t, p, pod, nodes)
	want := guest.Reject("zone: placing app=web in zone a would make skew 2 > maxSkew 1 (a=2, b=1)")
	if !guesttest.CheckStatus(t, p.Filter(c, nodes[0]), want) {
		t.Fatal("a-1")
	}
	// Preemption evaluates a-1 with web-2 removed as a victim: at the same
	// generation the cycle's verdict stands; at a new one (the copy the
	// scheduler hands out) the node is judged as it is.
	victimGone := zoneNode("a-1", "a", appPod("default", "web-1", "web").Placed())
	if !guesttest.CheckStatus(t, p.Filter(c, victimGone.Obj()), want) {
		t.Fatal("a-1 without web-2, same generation: want the cycle's verdict")
	}
	if s := p.Filter(c, victimGone.Generation(2).Obj()); !s.IsSuccess() {
		t.Fatalf("a-1 without web-2: %+v", s)
	}

	// The scheduler evaluates a node with a nominated pod added.
	nodes = []*guest.NodeInfo{
		zoneNode("a-1", "a").Obj(),
		zoneNode("b-1", "b").Obj(),
		zoneNode("c-1", "c", appPod("default", "web-1", "web").Placed()).Obj(),
	}
	c = cycle(t, p, pod, nodes)
	if s := p.Filter(c, nodes[1]); !s.IsSuccess() {
		t.Fatalf("b-1: %+v", s)
	}
	withNominated := zoneNode("b-1", "b", appPod("default", "web-2", "web").Placed()).Generation(2).Obj()
	want = guest.Reject("zone: placing app=web in zone b would make skew 2 > maxSkew 1 (a=0, b=1, c=1)")
	if !guesttest.CheckStatus(t, p.Filter(c, withNominated), want) {
		t.Fatal("b-1 with a nominated pod")
	}
}

func TestScore(t *testing.T) {
	p := mustParse(t, `{"deniedZones": ["d"]}`)
	nodes := []*guest.NodeInfo{
		zoneNode("a-1", "a", appPod("default", "w1", "web").Placed(), appPod("default", "w2", "web").Placed()).Obj(),
		zoneNode("b-1", "b", appPod("default", "w3", "web").Placed()).Obj(),
		zoneNode("b-2", "b").Obj(),
		zoneNode("c-1", "c").Obj(),
		zoneNode("edge-1", "").Obj(),
	}
	scoreAll := func(pod *guest.Pod) []int64 {
		t.Helper()
		c := cycle(t, p, pod, nodes)
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
	if got, want := scoreAll(appPod("default", "w4", "web").Obj()), []int64{0, 50, 50, 100, 0}; !slices.Equal(got, want) {
		t.Errorf("grouped pod: scores %v, want %v", got, want)
	}
	if got, want := scoreAll(appPod("default", "db", "db").Obj()), []int64{100, 100, 100, 100, 0}; !slices.Equal(got, want) {
		t.Errorf("first pod of its group: scores %v, want %v", got, want)
	}
	if got, want := scoreAll(appPod("default", "tool", "").Obj()), []int64{0, 0, 0, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("ungrouped pod: scores %v, want %v", got, want)
	}
}

func TestWithoutPreFilterState(t *testing.T) {
	p := mustParse(t, "")
	c := &guest.Cycle{Pod: appPod("default", "web", "web").Obj()}
	s := p.Filter(c, zoneNode("a-1", "a").Obj())
	if s.Code != guest.Error || !strings.HasPrefix(s.Reasons[0], "zone: ") {
		t.Fatalf("Filter without state: %+v", s)
	}
	// Node rules need no state: a zoneless node still passes.
	if s := p.Filter(c, zoneNode("edge-1", "").Obj()); !s.IsSuccess() {
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
