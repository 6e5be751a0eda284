package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
	"github.com/wasmsched/wasmsched/guest/guesttest"
)

// inGroup is the pod name of ns, with UID uid-<name>, labelled a member of
// group. A test makes it the pod being scheduled (member), a pod waiting at
// Permit on n1 (waiter) or one placed on a node (Placed).
func inGroup(ns, name, group string) *guesttest.PodWrapper {
	return guesttest.MakePod().Namespace(ns).Name(name).UID("uid-"+name).Label(LabelName, group)
}

// member is the pod being scheduled, a member of group with min-available
// min; an empty min leaves the annotation out.
func member(ns, name, group, min string) *guest.Pod {
	p := inGroup(ns, name, group)
	if min != "" {
		p.Annotation(AnnotationMinAvailable, min)
	}
	return p.Obj()
}

// waiter is a member of group waiting at Permit on n1.
func waiter(ns, name, group string) guest.WaitingPod { return inGroup(ns, name, group).Waiting("n1") }

// node is a node with pods placed on it.
func node(name string, pods ...*abiv1.PodSummary) *guest.NodeInfo {
	return guesttest.MakeNode().Name(name).Pods(pods...).Obj()
}

// mustParse builds the policy from settings as the Settings hook does.
func mustParse(t *testing.T, raw string) *Policy {
	t.Helper()
	return guesttest.Load(t, raw, DefaultSettings(), New)
}

func mustGang(t *testing.T, pod *guest.Pod) *Gang {
	t.Helper()
	g, err := Membership(pod)
	if err != nil || g == nil {
		t.Fatalf("Membership: %v, %v", g, err)
	}
	return g
}

func TestParseSettings(t *testing.T) {
	if p := mustParse(t, ""); p.timeout != 30*time.Second {
		t.Fatalf("default timeout %v", p.timeout)
	}
	if p := mustParse(t, `{"timeoutSeconds": 120}`); p.timeout != 2*time.Minute {
		t.Fatalf("timeout %v", p.timeout)
	}
	for _, tc := range []struct{ raw, want string }{
		{`{"timeoutSeconds": 0}`, `"timeoutSeconds" must be between 1 and 900 (the scheduler's longest Permit wait), got 0`},
		{`{"timeoutSeconds": 901}`, `"timeoutSeconds" must be between 1 and 900`},
		{`{"timeout": 10}`, `unknown field "timeout"`},
		{`{"timeoutSeconds": "10"}`, `timeoutSeconds`},
	} {
		_, err := guest.Load([]byte(tc.raw), DefaultSettings(), New)
		if err == nil || !strings.HasPrefix(err.Error(), "settings: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("guest.Load(%s) = %v, want an error containing %q", tc.raw, err, tc.want)
		}
	}
}

func TestPreFilter(t *testing.T) {
	p := mustParse(t, "")
	for _, tc := range []struct {
		name string
		pod  *guest.Pod
		want guest.Status
		gang *Gang
	}{
		{"member", member("ml", "w1", "g1", "4"), guest.OK(), &Gang{Namespace: "ml", Name: "g1", MinAvailable: 4}},
		{"not a member", guesttest.MakePod().Namespace("ml").Name("web").Annotation(AnnotationMinAvailable, "3").Obj(), guest.OK(), nil},
		{"malformed count", member("ml", "w1", "g1", "four"),
			guest.RejectUnresolvable(`gang: annotation gang.wasmsched.io/min-available is "four", want a positive integer`), nil},
		{"zero", member("ml", "w1", "g1", "0"),
			guest.RejectUnresolvable(`gang: annotation gang.wasmsched.io/min-available is "0", want a positive integer`), nil},
		{"no annotation", member("ml", "w1", "g1", ""),
			guest.RejectUnresolvable("gang: pod has label gang.wasmsched.io/name=g1 but no annotation gang.wasmsched.io/min-available"), nil},
		{"empty name", member("ml", "w1", "", "2"), guest.RejectUnresolvable("gang: label gang.wasmsched.io/name is empty"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &guest.Cycle{Pod: tc.pod}
			s := p.PreFilter(c)
			if !guesttest.CheckStatus(t, s, tc.want) {
				return
			}
			if !s.IsSuccess() {
				return
			}
			g, _ := gangOf(c)
			if (g == nil) != (tc.gang == nil) || (g != nil && *g != *tc.gang) {
				t.Fatalf("gang %+v, want %+v", g, tc.gang)
			}
		})
	}
}

func TestAdmit(t *testing.T) {
	p := mustParse(t, `{"timeoutSeconds": 45}`)
	pod := member("ml", "w3", "g1", "4")
	g := mustGang(t, pod)
	waiting := []guest.WaitingPod{
		waiter("ml", "w1", "g1"),
		waiter("ml", "o1", "g2"),    // another gang
		waiter("other", "x1", "g1"), // the same name in another namespace
		waiter("ml", "w2", "g1"),
	}
	// w1 waits at Permit and is assumed on n1: it counts once.
	nodes := []*guest.NodeInfo{
		node("n1", inGroup("ml", "w1", "g1").Placed(), inGroup("other", "x2", "g1").Placed()),
		node("n2"),
	}

	// w1, w2 and w3 itself: 3 of 4.
	r := p.Admit(guesttest.NewCycle(pod, nodes...), g, waiting)
	if r.Status.Code != guest.Wait || r.Timeout != 45*time.Second || len(r.Actions) != 0 {
		t.Fatalf("3 of 4: %+v", r)
	}
	if want := "gang: group g1 has 3 of 4 members ready, waiting for 1 more"; r.Status.Reasons[0] != want {
		t.Fatalf("reason %q, want %q", r.Status.Reasons[0], want)
	}

	// A bound member on n2 completes the gang: w3 passes and the waiting
	// members of g1 (only they) are allowed.
	nodes[1] = node("n2", inGroup("ml", "b1", "g1").Placed())
	r = p.Admit(guesttest.NewCycle(pod, nodes...), g, waiting)
	want := []guest.WaitingPodAction{{UID: "uid-w1", Allow: true}, {UID: "uid-w2", Allow: true}}
	if !r.Status.IsSuccess() || !slices.Equal(r.Actions, want) {
		t.Fatalf("4 of 4: %+v, want success with %+v", r, want)
	}

	// The host may list the pod itself among the waiting: it counts once
	// and is not acted on.
	withSelf := append([]guest.WaitingPod{waiter("ml", "w3", "g1")}, waiting...)
	r = p.Admit(guesttest.NewCycle(pod, nodes...), g, withSelf)
	if !r.Status.IsSuccess() || !slices.Equal(r.Actions, want) {
		t.Fatalf("self listed: %+v, want success with %+v", r, want)
	}
	nodes[1] = node("n2")
	if r = p.Admit(guesttest.NewCycle(pod, nodes...), g, withSelf); r.Status.Code != guest.Wait {
		t.Fatalf("self listed, 3 of 4: %+v", r)
	}
}

func TestAdmitAloneAndOutsideGangs(t *testing.T) {
	p := mustParse(t, "")
	solo := member("ml", "s1", "solo", "1")
	r := p.Admit(guesttest.NewCycle(solo), mustGang(t, solo), nil)
	if !r.Status.IsSuccess() || len(r.Actions) != 0 {
		t.Fatalf("min-available 1: %+v", r)
	}
	plain := guesttest.MakePod().Namespace("ml").Name("web").UID("uid-web").Obj()
	r = p.Admit(guesttest.NewCycle(plain), nil, []guest.WaitingPod{waiter("ml", "w1", "g1")})
	if !r.Status.IsSuccess() || len(r.Actions) != 0 {
		t.Fatalf("no gang: %+v", r)
	}
}

func TestRelease(t *testing.T) {
	pod := member("ml", "w3", "g1", "5")
	g := mustGang(t, pod)
	waiting := []guest.WaitingPod{
		waiter("ml", "w3", "g1"), // the pod itself, if the host lists it
		waiter("ml", "w1", "g1"),
		waiter("ml", "o1", "g2"),
		waiter("other", "x1", "g1"),
		waiter("ml", "w2", "g1"),
	}
	nodes := []*guest.NodeInfo{node("n1", inGroup("ml", "w1", "g1").Placed(), inGroup("ml", "b1", "g1").Placed())}
	got := Release(guesttest.NewCycle(pod, nodes...), g, waiting)
	reason := "gang: group g1 released: 4 of 5 members ready when ml/w3 timed out or failed"
	want := []guest.WaitingPodAction{{UID: "uid-w1", Reason: reason}, {UID: "uid-w2", Reason: reason}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := Release(guesttest.NewCycle(pod, nodes...), nil, waiting); got != nil {
		t.Fatalf("no gang: %+v", got)
	}
	if got := Release(guesttest.NewCycle(pod, nodes...), g, waiting[2:4]); got != nil {
		t.Fatalf("no waiting member: %+v", got)
	}
}

func TestWithoutPreFilterState(t *testing.T) {
	p := mustParse(t, "")
	c := &guest.Cycle{Pod: member("ml", "w1", "g1", "2")}
	if r := p.Permit(c, node("n1"), nil); r.Status.Code != guest.Error || !strings.HasPrefix(r.Status.Reasons[0], "gang: ") {
		t.Fatalf("Permit without state: %+v", r)
	}
	if acts := p.Unreserve(c, node("n1"), []guest.WaitingPod{waiter("ml", "w2", "g1")}); acts != nil {
		t.Fatalf("Unreserve without state: %+v", acts)
	}
}
