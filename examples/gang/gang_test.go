package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
)

func kv(pairs ...string) []*abiv1.KeyValue {
	var out []*abiv1.KeyValue
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, &abiv1.KeyValue{Key: pairs[i], Value: pairs[i+1]})
	}
	return out
}

// member builds a gang member of group in ns with min-available min; an
// empty min leaves the annotation out.
func member(ns, name, group, min string) *guest.Pod {
	p := &abiv1.Pod{Name: name, Namespace: ns, Uid: "uid-" + name, Labels: kv(LabelName, group)}
	if min != "" {
		p.Annotations = kv(AnnotationMinAvailable, min)
	}
	return &guest.Pod{Pod: p}
}

func waiter(ns, name, group string) guest.WaitingPod {
	return guest.WaitingPod{WaitingPod: &abiv1.WaitingPod{Name: name, Namespace: ns, Uid: "uid-" + name, Labels: kv(LabelName, group), NodeName: "n1"}}
}

func placed(ns, name, group string) *abiv1.PodSummary {
	return &abiv1.PodSummary{Name: name, Namespace: ns, Uid: "uid-" + name, Labels: kv(LabelName, group)}
}

func node(name string, pods ...*abiv1.PodSummary) *guest.NodeInfo {
	return &guest.NodeInfo{NodeInfo: &abiv1.NodeInfo{Node: &abiv1.Node{Name: name}, Pods: pods}}
}

func mustParse(t *testing.T, raw string) *Policy {
	t.Helper()
	p, err := Parse([]byte(raw))
	if err != nil {
		t.Fatalf("Parse(%s): %v", raw, err)
	}
	return p
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
		_, err := Parse([]byte(tc.raw))
		if err == nil || !strings.HasPrefix(err.Error(), "settings: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v, want an error containing %q", tc.raw, err, tc.want)
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
		{"not a member", &guest.Pod{Pod: &abiv1.Pod{Name: "web", Namespace: "ml", Annotations: kv(AnnotationMinAvailable, "3")}}, guest.OK(), nil},
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
			if s.Code != tc.want.Code || !slices.Equal(s.Reasons, tc.want.Reasons) {
				t.Fatalf("got %+v, want %+v", s, tc.want)
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
		node("n1", placed("ml", "w1", "g1"), placed("other", "x2", "g1")),
		node("n2"),
	}

	// w1, w2 and w3 itself: 3 of 4.
	r := p.Admit(pod, g, waiting, slices.Values(nodes))
	if r.Status.Code != guest.Wait || r.Timeout != 45*time.Second || len(r.Actions) != 0 {
		t.Fatalf("3 of 4: %+v", r)
	}
	if want := "gang: group g1 has 3 of 4 members ready, waiting for 1 more"; r.Status.Reasons[0] != want {
		t.Fatalf("reason %q, want %q", r.Status.Reasons[0], want)
	}

	// A bound member on n2 completes the gang: w3 passes and the waiting
	// members of g1 (only they) are allowed.
	nodes[1] = node("n2", placed("ml", "b1", "g1"))
	r = p.Admit(pod, g, waiting, slices.Values(nodes))
	want := []guest.WaitingPodAction{{UID: "uid-w1", Allow: true}, {UID: "uid-w2", Allow: true}}
	if !r.Status.IsSuccess() || !slices.Equal(r.Actions, want) {
		t.Fatalf("4 of 4: %+v, want success with %+v", r, want)
	}

	// The host may list the pod itself among the waiting: it counts once
	// and is not acted on.
	withSelf := append([]guest.WaitingPod{waiter("ml", "w3", "g1")}, waiting...)
	r = p.Admit(pod, g, withSelf, slices.Values(nodes))
	if !r.Status.IsSuccess() || !slices.Equal(r.Actions, want) {
		t.Fatalf("self listed: %+v, want success with %+v", r, want)
	}
	nodes[1] = node("n2")
	if r = p.Admit(pod, g, withSelf, slices.Values(nodes)); r.Status.Code != guest.Wait {
		t.Fatalf("self listed, 3 of 4: %+v", r)
	}
}

func TestAdmitAloneAndOutsideGangs(t *testing.T) {
	p := mustParse(t, "")
	solo := member("ml", "s1", "solo", "1")
	r := p.Admit(solo, mustGang(t, solo), nil, slices.Values([]*guest.NodeInfo(nil)))
	if !r.Status.IsSuccess() || len(r.Actions) != 0 {
		t.Fatalf("min-available 1: %+v", r)
	}
	plain := &guest.Pod{Pod: &abiv1.Pod{Name: "web", Namespace: "ml", Uid: "uid-web"}}
	r = p.Admit(plain, nil, []guest.WaitingPod{waiter("ml", "w1", "g1")}, slices.Values([]*guest.NodeInfo(nil)))
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
	nodes := []*guest.NodeInfo{node("n1", placed("ml", "w1", "g1"), placed("ml", "b1", "g1"))}
	got := Release(pod, g, waiting, slices.Values(nodes))
	reason := "gang: group g1 released: 4 of 5 members ready when ml/w3 timed out or failed"
	want := []guest.WaitingPodAction{{UID: "uid-w1", Reason: reason}, {UID: "uid-w2", Reason: reason}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := Release(pod, nil, waiting, slices.Values(nodes)); got != nil {
		t.Fatalf("no gang: %+v", got)
	}
	if got := Release(pod, g, waiting[2:4], slices.Values(nodes)); got != nil {
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
