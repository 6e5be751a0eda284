package main

import (
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/guest"
	"github.com/wasmsched/wasmsched/guest/guesttest"
)

// These tests run the policy natively, on the messages the host would send
// (built by guesttest); the same rules are run through the wasm module in
// wasm_test.go.

// podWith is a pod with annotations.
func podWith(annotations map[string]string) *guest.Pod {
	return guesttest.MakePod().Namespace("default").Name("p").Annotations(annotations).Obj()
}

// nodeWith is a node named n with labels.
func nodeWith(labels map[string]string) *guest.NodeInfo {
	return guesttest.MakeNode().Name("n").Labels(labels).Obj()
}

// mustLoad builds the policy from settings as the Settings hook does.
func mustLoad(t *testing.T, raw string) *Policy {
	t.Helper()
	return guesttest.Load(t, raw, DefaultSettings(), New)
}

func TestLoad(t *testing.T) {
	tests := []struct {
		raw         string
		space, edge pair
		wantErr     string
	}{
		{raw: "", space: pair{"type", "space"}, edge: pair{"kubernetes.io/role", "edge"}},
		{raw: "{}", space: pair{"type", "space"}, edge: pair{"kubernetes.io/role", "edge"}},
		{raw: `{"annotation": "example.com/orbit=leo"}`, space: pair{"example.com/orbit", "leo"}, edge: pair{"kubernetes.io/role", "edge"}},
		{raw: `{"edgeLabel": "node-role.kubernetes.io/edge="}`, space: pair{"type", "space"}, edge: pair{"node-role.kubernetes.io/edge", ""}},
		{raw: `{"edgeLabel": "a=b=c"}`, space: pair{"type", "space"}, edge: pair{"a", "b=c"}},
		{raw: `{"annotation": "type"}`, wantErr: `settings: "annotation" must be key=value with a non-empty key, not "type"`},
		{raw: `{"edgeLabel": "=edge"}`, wantErr: `settings: "edgeLabel" must be key=value with a non-empty key, not "=edge"`},
		{raw: `{"edgeLabel": ""}`, wantErr: `"edgeLabel" must be key=value`},
		{raw: `{"label": "kubernetes.io/role=edge"}`, wantErr: `unknown field "label"`},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			p, err := guest.Load([]byte(tt.raw), DefaultSettings(), New)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load(%s) = %v, want an error containing %q", tt.raw, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load(%s): %v", tt.raw, err)
			}
			if p.space != tt.space || p.edge != tt.edge {
				t.Errorf("Load(%s) = %v %v, want %v %v", tt.raw, p.space, p.edge, tt.space, tt.edge)
			}
		})
	}
}

const (
	notEdgeWorker  = "edge: not an edge node: space workloads (annotation type=space) need label kubernetes.io/role=edge, node has kubernetes.io/role=worker"
	notEdgeGateway = "edge: not an edge node: space workloads (annotation type=space) need label kubernetes.io/role=edge, node has kubernetes.io/role=gateway"
	notEdgeNoLabel = "edge: not an edge node: space workloads (annotation type=space) need label kubernetes.io/role=edge, node has no kubernetes.io/role label"
)

var (
	space      = map[string]string{"type": "space"}
	edge       = map[string]string{"kubernetes.io/role": "edge"}
	worker     = map[string]string{"kubernetes.io/role": "worker"}
	unlabelled = map[string]string{"kubernetes.io/hostname": "n"}
)

func TestRules(t *testing.T) {
	tests := []struct {
		name        string
		settings    string
		annotations map[string]string
		labels      map[string]string
		preFilter   guest.Code
		filter      guest.Status
		score       int64
	}{
		{name: "space on edge", annotations: space, labels: edge, preFilter: guest.Success, filter: guest.OK(), score: 100},
		{name: "space on worker", annotations: space, labels: worker, preFilter: guest.Success,
			filter: guest.RejectUnresolvable(notEdgeWorker)},
		{name: "space on unlabelled node", annotations: space, labels: unlabelled, preFilter: guest.Success,
			filter: guest.RejectUnresolvable(notEdgeNoLabel)},
		{name: "space on role=Edge (case matters)", annotations: space, labels: map[string]string{"kubernetes.io/role": "Edge"}, preFilter: guest.Success,
			filter: guest.RejectUnresolvable(
				"edge: not an edge node: space workloads (annotation type=space) need label kubernetes.io/role=edge, node has kubernetes.io/role=Edge")},
		{name: "other pod on edge", labels: edge, preFilter: guest.Skip, filter: guest.OK(), score: 0},
		{name: "other pod on worker", labels: worker, preFilter: guest.Skip, filter: guest.OK(), score: 100},
		{name: "other pod on unlabelled node", labels: unlabelled, preFilter: guest.Skip, filter: guest.OK(), score: 100},
		{name: "type other than space", annotations: map[string]string{"type": "ground"}, labels: edge, preFilter: guest.Skip, filter: guest.OK(), score: 0},
		{name: "custom settings: space", settings: `{"annotation": "example.com/orbit=leo", "edgeLabel": "node-role.kubernetes.io/edge="}`,
			annotations: map[string]string{"example.com/orbit": "leo"}, labels: map[string]string{"node-role.kubernetes.io/edge": ""},
			preFilter: guest.Success, filter: guest.OK(), score: 100},
		{name: "custom settings: space on worker", settings: `{"annotation": "example.com/orbit=leo", "edgeLabel": "node-role.kubernetes.io/edge="}`,
			annotations: map[string]string{"example.com/orbit": "leo"}, labels: edge, preFilter: guest.Success,
			filter: guest.RejectUnresolvable(
				"edge: not an edge node: space workloads (annotation example.com/orbit=leo) need label node-role.kubernetes.io/edge=, node has no node-role.kubernetes.io/edge label")},
		{name: "custom settings: default annotation no longer counts", settings: `{"annotation": "example.com/orbit=leo"}`,
			annotations: space, labels: worker, preFilter: guest.Skip, filter: guest.OK(), score: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustLoad(t, tt.settings)
			c := &guest.Cycle{Pod: podWith(tt.annotations)}
			n := nodeWith(tt.labels)
			if got := p.PreFilter(c); got.Code != tt.preFilter {
				t.Errorf("PreFilter = %v, want %v", got.Code, tt.preFilter)
			}
			guesttest.CheckStatus(t, p.Filter(c, n), tt.filter)
			if !tt.filter.IsSuccess() {
				return
			}
			v, s := p.Score(c, n)
			guesttest.CheckStatus(t, s, guest.OK())
			if v != tt.score {
				t.Errorf("Score = %d, want %d", v, tt.score)
			}
		})
	}
}

// TestFilterReasonsAcrossNodes checks the remembered rejection follows the
// node's label value.
func TestFilterReasonsAcrossNodes(t *testing.T) {
	p := mustLoad(t, "")
	c := &guest.Cycle{Pod: podWith(space)}
	for _, tt := range []struct {
		labels map[string]string
		want   guest.Status
	}{
		{worker, guest.RejectUnresolvable(notEdgeWorker)},
		{worker, guest.RejectUnresolvable(notEdgeWorker)},
		{map[string]string{"kubernetes.io/role": "gateway"}, guest.RejectUnresolvable(notEdgeGateway)},
		{unlabelled, guest.RejectUnresolvable(notEdgeNoLabel)},
		{worker, guest.RejectUnresolvable(notEdgeWorker)},
	} {
		guesttest.CheckStatus(t, p.Filter(c, nodeWith(tt.labels)), tt.want)
	}
}

func TestFilterDoesNotAllocate(t *testing.T) {
	p := mustLoad(t, "")
	c := &guest.Cycle{Pod: podWith(space)}
	for _, labels := range []map[string]string{edge, worker, unlabelled} {
		n := nodeWith(labels)
		p.Filter(c, n)
		if allocs := testing.AllocsPerRun(100, func() { p.Filter(c, n); p.Score(c, n) }); allocs != 0 {
			t.Errorf("Filter and Score on a node labelled %v: %v allocations, want 0", labels, allocs)
		}
	}
}
