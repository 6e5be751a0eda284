package guesttest

import (
	"fmt"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
)

func keys(kvs []*abiv1.KeyValue) string {
	s := ""
	for _, kv := range kvs {
		s += kv.Key + "=" + kv.Value + " "
	}
	return s
}

func TestPodIsWhatTheHostSends(t *testing.T) {
	w := MakePod().Namespace("ml").Name("w1").UID("uid-w1").
		Labels(map[string]string{"z": "1", "a": "2"}).Label("m", "3").
		Annotation("gang", "4").NodeSelector(map[string]string{"disk": "ssd"}).
		Req(map[string]int64{"nvidia.com/gpu": 2, guest.ResourceCPU: 500, "amd.com/gpu": 1, "example.com/none": 0})
	p := w.Obj()
	if p.Key() != "ml/w1" || p.UID() != "uid-w1" {
		t.Errorf("pod %s uid %s", p.Key(), p.UID())
	}
	if got := keys(p.Labels()); got != "a=2 m=3 z=1 " {
		t.Errorf("labels %q, want them sorted by key", got)
	}
	if v, _ := p.Annotation("gang"); v != "4" || keys(p.NodeSelector()) != "disk=ssd " {
		t.Errorf("annotation %q, node selector %q", v, keys(p.NodeSelector()))
	}
	r := p.Message().Requests
	if r.MilliCpu != 500 || len(r.Scalars) != 2 || r.Scalars[0].Name != "amd.com/gpu" || r.Scalars[1].Name != "nvidia.com/gpu" {
		t.Errorf("requests %v, want cpu in its field, scalars sorted by name and the zero one left out", r)
	}
	if w.Obj().Message() == p.Message() {
		t.Error("Obj returned the same message twice")
	}
	if s := w.Placed(); s.Name != "w1" || s.Uid != "uid-w1" || keys(s.Labels) != "a=2 m=3 z=1 " || s.Requests.MilliCpu != 500 {
		t.Errorf("placed %v", s)
	}
	if wp := w.Waiting("n1"); wp.NodeName() != "n1" || wp.UID() != "uid-w1" || keys(wp.Message().Annotations) != "gang=4 " {
		t.Errorf("waiting %v", wp.Message())
	}
	if e := MakePod().Obj(); e.Labels() != nil || e.Message().Requests != nil {
		t.Errorf("an empty pod has %v, %v", e.Labels(), e.Message().Requests)
	}
}

func TestNodeIsWhatTheHostSends(t *testing.T) {
	web := MakePod().Namespace("default").Name("web").Placed()
	n := MakeNode().Name("a-1").Label(guest.LabelZone, "a").Generation(3).
		Allocatable(map[string]int64{guest.ResourceCPU: 8000, "nvidia.com/gpu": 4}).
		Requested(map[string]int64{"nvidia.com/gpu": 1}).Pods(web, web).Obj()
	if n.Name() != "a-1" || n.Zone() != "a" || n.Generation() != 3 {
		t.Errorf("node %s zone %s generation %d", n.Name(), n.Zone(), n.Generation())
	}
	if n.Allocatable(guest.ResourceCPU) != 8000 || n.Free("nvidia.com/gpu") != 3 {
		t.Errorf("cpu %d, free gpus %d", n.Allocatable(guest.ResourceCPU), n.Free("nvidia.com/gpu"))
	}
	if len(n.Pods()) != 2 || n.PodCount() != 2 {
		t.Errorf("%d pods, count %d", len(n.Pods()), n.PodCount())
	}
}

// recorder records what CheckStatus reports instead of failing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestCheckStatus(t *testing.T) {
	for _, tc := range []struct {
		got, want guest.Status
		ok        bool
	}{
		{guest.OK(), guest.OK(), true},
		{guest.Reject("r: %d", 1), guest.Reject("r: 1"), true},
		{guest.Reject("r"), guest.RejectUnresolvable("r"), false},
		{guest.Reject("r"), guest.Reject("s"), false},
		{guest.Status{Code: guest.Success, Reasons: []string{}}, guest.OK(), true},
		{guest.Status{}, guest.OK(), false},
	} {
		r := &recorder{}
		if ok := CheckStatus(r, tc.got, tc.want); ok != tc.ok || (len(r.errs) == 0) != tc.ok {
			t.Errorf("CheckStatus(%v, %v) = %v, reported %q; want %v", tc.got, tc.want, ok, r.errs, tc.ok)
		}
	}
}
