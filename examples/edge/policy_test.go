package main

import (
	"slices"
	"sort"
	"strings"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
)

// These tests run the policy natively, on ABI messages built by hand; the
// same rules are run through the wasm module in eval_test.go.

func kvs(m map[string]string) []*abiv1.KeyValue {
	out := make([]*abiv1.KeyValue, 0, len(m))
	for k, v := range m {
		out = append(out, &abiv1.KeyValue{Key: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func newPod(annotations map[string]string) *guest.Pod {
	return &guest.Pod{Pod: &abiv1.Pod{Name: "p", Namespace: "default", Annotations: kvs(annotations)}}
}

func newNode(name string, labels map[string]string) *guest.NodeInfo {
	return &guest.NodeInfo{NodeInfo: &abiv1.NodeInfo{Node: &abiv1.Node{Name: name, Labels: kvs(labels)}}}
}

func mustLoad(t *testing.T, raw string) *Policy {
	t.Helper()
	p, err := Load([]byte(raw))
	if err != nil {
		t.Fatalf("Load(%s): %v", raw, err)
	}
	return p
}

func checkStatus(t *testing.T, got guest.Status, code guest.Code, reason string) {
	t.Helper()
	var want []string
	if reason != "" {
		want = []string{reason}
	}
	if got.Code != code || !slices.Equal(got.Reasons, want) {
		t.Errorf("status = %v %q, want %v %q", got.Code, got.Reasons, code, want)
	}
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
			p, err := Load([]byte(tt.raw))
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
		code        guest.Code
		reason      string
		score       int64
	}{
		{name: "space on edge", annotations: space, labels: edge, preFilter: guest.Success, code: guest.Success, score: 100},
		{name: "space on worker", annotations: space, labels: worker, preFilter: guest.Success,
			code: guest.UnschedulableAndUnresolvable, reason: notEdgeWorker},
		{name: "space on unlabelled node", annotations: space, labels: unlabelled, preFilter: guest.Success,
			code: guest.UnschedulableAndUnresolvable, reason: notEdgeNoLabel},
		{name: "space on role=Edge (case matters)", annotations: space, labels: map[string]string{"kubernetes.io/role": "Edge"}, preFilter: guest.Success,
			code:   guest.UnschedulableAndUnresolvable,
			reason: "edge: not an edge node: space workloads (annotation type=space) need label kubernetes.io/role=edge, node has kubernetes.io/role=Edge"},
		{name: "other pod on edge", labels: edge, preFilter: guest.Skip, code: guest.Success, score: 0},
		{name: "other pod on worker", labels: worker, preFilter: guest.Skip, code: guest.Success, score: 100},
		{name: "other pod on unlabelled node", labels: unlabelled, preFilter: guest.Skip, code: guest.Success, score: 100},
		{name: "type other than space", annotations: map[string]string{"type": "ground"}, labels: edge, preFilter: guest.Skip, code: guest.Success, score: 0},
		{name: "custom settings: space", settings: `{"annotation": "example.com/orbit=leo", "edgeLabel": "node-role.kubernetes.io/edge="}`,
			annotations: map[string]string{"example.com/orbit": "leo"}, labels: map[string]string{"node-role.kubernetes.io/edge": ""},
			preFilter: guest.Success, code: guest.Success, score: 100},
		{name: "custom settings: space on worker", settings: `{"annotation": "example.com/orbit=leo", "edgeLabel": "node-role.kubernetes.io/edge="}`,
			annotations: map[string]string{"example.com/orbit": "leo"}, labels: edge, preFilter: guest.Success,
			code:   guest.UnschedulableAndUnresolvable,
			reason: "edge: not an edge node: space workloads (annotation example.com/orbit=leo) need label node-role.kubernetes.io/edge=, node has no node-role.kubernetes.io/edge label"},
		{name: "custom settings: default annotation no longer counts", settings: `{"annotation": "example.com/orbit=leo"}`,
			annotations: space, labels: worker, preFilter: guest.Skip, code: guest.Success, score: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustLoad(t, tt.settings)
			c := &guest.Cycle{Pod: newPod(tt.annotations)}
			n := newNode("n", tt.labels)
			if got := p.PreFilter(c); got.Code != tt.preFilter {
				t.Errorf("PreFilter = %v, want %v", got.Code, tt.preFilter)
			}
			checkStatus(t, p.Filter(c, n), tt.code, tt.reason)
			if tt.code != guest.Success {
				return
			}
			v, s := p.Score(c, n)
			checkStatus(t, s, guest.Success, "")
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
	c := &guest.Cycle{Pod: newPod(space)}
	for _, tt := range []struct {
		labels map[string]string
		reason string
	}{
		{worker, notEdgeWorker},
		{worker, notEdgeWorker},
		{map[string]string{"kubernetes.io/role": "gateway"}, strings.Replace(notEdgeWorker, "=worker", "=gateway", 1)},
		{unlabelled, notEdgeNoLabel},
		{worker, notEdgeWorker},
	} {
		checkStatus(t, p.Filter(c, newNode("n", tt.labels)), guest.UnschedulableAndUnresolvable, tt.reason)
	}
}

func TestFilterDoesNotAllocate(t *testing.T) {
	p := mustLoad(t, "")
	c := &guest.Cycle{Pod: newPod(space)}
	for _, labels := range []map[string]string{edge, worker, unlabelled} {
		n := newNode("n", labels)
		p.Filter(c, n)
		if allocs := testing.AllocsPerRun(100, func() { p.Filter(c, n); p.Score(c, n) }); allocs != 0 {
			t.Errorf("Filter and Score on a node labelled %v: %v allocations, want 0", labels, allocs)
		}
	}
}
