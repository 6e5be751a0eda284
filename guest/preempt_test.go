package guest

import (
	"strings"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// preemptState is the per-cycle state of the policy in the tests below: the
// pods on the node the simulation removed and added, in order.
type preemptState struct{ log []string }

// preemptPolicy admits the pod only on a node from which the pod named by
// its "needs-gone" label was removed; AddPod of a pod labelled "veto"
// rejects; SelectVictims proposes every pod labelled "cheap".
func preemptPolicy() *Policy {
	return &Policy{
		Name:      "preempt",
		PreFilter: func(c *Cycle) Status { c.State = &preemptState{}; return OK() },
		RemovePod: func(c *Cycle, pod *abiv1.PodSummary, n *NodeInfo) Status {
			st := c.State.(*preemptState)
			st.log = append(st.log, "-"+pod.Name)
			return OK()
		},
		AddPod: func(c *Cycle, pod *abiv1.PodSummary, n *NodeInfo) Status {
			if _, ok := Lookup(pod.Labels, "veto"); ok {
				return Reject("preempt: %s vetoes", pod.Name)
			}
			st := c.State.(*preemptState)
			st.log = append(st.log, "+"+pod.Name)
			return OK()
		},
		Filter: func(c *Cycle, n *NodeInfo) Status {
			st := c.State.(*preemptState)
			want, _ := c.Pod.Label("needs-gone")
			gone := false
			for _, e := range st.log {
				switch e {
				case "-" + want:
					gone = true
				case "+" + want:
					gone = false
				}
			}
			if !gone {
				return Reject("preempt: %s still on %s (%s)", want, n.Name(), strings.Join(st.log, " "))
			}
			return OK()
		},
		SelectVictims: func(c *Cycle, n *NodeInfo, pods []*abiv1.PodSummary) ([]string, Status) {
			var out []string
			for _, p := range pods {
				if _, ok := Lookup(p.Labels, "cheap"); ok {
					out = append(out, p.Uid)
				}
			}
			if len(out) == 0 {
				return nil, Reject("preempt: nothing cheap on %s", n.Name())
			}
			return out, OK()
		},
	}
}

// startPreempt initialises the instance with the policy, syncs node n1
// (handle 0) and starts a cycle of a pod that needs pod "victim" gone.
func startPreempt(t *testing.T) {
	t.Helper()
	inst = &instance{policy: preemptPolicy()}
	send := func(m marshaler) uint32 {
		b := marshal(t, m)
		copy(inst.buffer(uint32(len(b))), b)
		return uint32(len(b))
	}
	if code := inst.init(send(&abiv1.InitRequest{HostAbiVersion: ABIVersion, PolicyName: "preempt"})); code != uint32(Success) {
		t.Fatalf("init answered %d", code)
	}
	if inst.info.Points&(1<<uint(abiv1.Point_POINT_POD_CHANGES)) == 0 || inst.info.Points&(1<<uint(abiv1.Point_POINT_SELECT_VICTIMS)) == 0 {
		t.Fatalf("points %b lack POD_CHANGES or SELECT_VICTIMS", inst.info.Points)
	}
	if code := inst.sync(send(&abiv1.NodeSync{Upserts: []*abiv1.NodeInfo{{Handle: 0, Generation: 1, Node: &abiv1.Node{Name: "n1"}}}})); code != uint32(Success) {
		t.Fatalf("sync answered %d", code)
	}
	pod := &abiv1.Pod{Name: "p", Namespace: "d", Uid: "u", Labels: []*abiv1.KeyValue{{Key: "needs-gone", Value: "victim"}}}
	if code := inst.startCycle(send(&abiv1.CycleRequest{Cycle: 1, Pod: pod})); code != uint32(Success) {
		t.Fatalf("cycle answered %d", code)
	}
}

// call sends m to wasmsched_call at pt and returns the code and the result
// as the host decodes it.
func callPoint(t *testing.T, pt abiv1.Point, m marshaler) (Code, *abiv1.Result) {
	t.Helper()
	b := marshal(t, m)
	copy(inst.buffer(uint32(len(b))), b)
	code := inst.call(uint32(pt), uint32(len(b)))
	var r abiv1.Result
	if err := r.UnmarshalVT(inst.marshalResult()); err != nil {
		t.Fatalf("undecodable Result: %v", err)
	}
	return Code(code), &r
}

// TestFilterChanged: Filter under changes sees PreFilter's fresh State with
// the changes applied in order, a non-success from AddPod is the verdict,
// and the cycle's own State is untouched by the simulations (the plain
// Filter afterwards rejects as it did before).
func TestFilterChanged(t *testing.T) {
	startPreempt(t)
	defer func() { inst = &instance{} }()
	pod := func(name string, labels ...string) *abiv1.PodSummary {
		s := &abiv1.PodSummary{Name: name, Namespace: "d", Uid: "uid-" + name}
		for _, l := range labels {
			s.Labels = append(s.Labels, &abiv1.KeyValue{Key: l})
		}
		return s
	}
	removed := func(p *abiv1.PodSummary) *abiv1.PodChange { return &abiv1.PodChange{Removed: true, Pod: p} }
	added := func(p *abiv1.PodSummary) *abiv1.PodChange { return &abiv1.PodChange{Pod: p} }
	stateBefore := inst.cycle.State
	for _, tc := range []struct {
		name    string
		changes []*abiv1.PodChange
		code    Code
		reason  string
	}{
		{"none", nil, Unschedulable, "preempt: victim still on n1 ()"},
		{"victim removed", []*abiv1.PodChange{removed(pod("other")), removed(pod("victim"))}, Success, ""},
		{"victim put back", []*abiv1.PodChange{removed(pod("victim")), added(pod("victim"))}, Unschedulable, "preempt: victim still on n1 (-victim +victim)"},
		{"addpod vetoes", []*abiv1.PodChange{removed(pod("victim")), added(pod("nominated", "veto"))}, Unschedulable, "preempt: nominated vetoes"},
		{"a change without a pod", []*abiv1.PodChange{{Removed: true}}, Error, "FilterRequest change 0 without a pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, r := callPoint(t, abiv1.Point_POINT_FILTER, &abiv1.FilterRequest{NodeHandle: 0, Changes: tc.changes})
			if code != tc.code || strings.Join(r.Reasons, "; ") != tc.reason {
				t.Errorf("answered %v %q; want %v %q", code, r.Reasons, tc.code, tc.reason)
			}
			if inst.cycle.State != stateBefore || len(stateBefore.(*preemptState).log) != 0 {
				t.Errorf("the cycle's State changed: %#v", inst.cycle.State)
			}
		})
	}
	if v := inst.filter(0); Code(v>>32) != Unschedulable {
		t.Errorf("plain Filter after the simulations answered %v", Code(v>>32))
	}
	if code, r := callPoint(t, abiv1.Point_POINT_FILTER, &abiv1.FilterRequest{NodeHandle: 9}); code != Error || r.Reasons[0] != "node handle 9 was never synced" {
		t.Errorf("unknown node: %v %q", code, r.Reasons)
	}
}

// TestSelectVictims: the policy's victims come back in Result.victims, in
// its order; a rejection carries reasons and no victims.
func TestSelectVictims(t *testing.T) {
	startPreempt(t)
	defer func() { inst = &instance{} }()
	kv := []*abiv1.KeyValue{{Key: "cheap"}}
	pods := []*abiv1.PodSummary{{Name: "a", Uid: "ua", Labels: kv}, {Name: "b", Uid: "ub"}, {Name: "c", Uid: "uc", Labels: kv}}
	code, r := callPoint(t, abiv1.Point_POINT_SELECT_VICTIMS, &abiv1.VictimsRequest{NodeHandle: 0, Pods: pods})
	if code != Success || strings.Join(r.Victims, ",") != "ua,uc" {
		t.Errorf("answered %v, victims %q", code, r.Victims)
	}
	code, r = callPoint(t, abiv1.Point_POINT_SELECT_VICTIMS, &abiv1.VictimsRequest{NodeHandle: 0, Pods: pods[1:2]})
	if code != Unschedulable || len(r.Victims) != 0 || strings.Join(r.Reasons, "") != "preempt: nothing cheap on n1" {
		t.Errorf("answered %v, victims %q, reasons %q", code, r.Victims, r.Reasons)
	}
	inst.policy.SelectVictims = nil
	if code, _ := callPoint(t, abiv1.Point_POINT_SELECT_VICTIMS, &abiv1.VictimsRequest{NodeHandle: 0, Pods: pods}); code != Unschedulable {
		t.Errorf("without SelectVictims: answered %v", code)
	}
}
