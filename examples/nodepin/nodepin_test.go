//go:build !wasip1

package main

import (
	"context"
	"strings"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
	"github.com/wasmsched/wasmsched/host/eval"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func TestMain(m *testing.M) { testwasm.Main(m) }

func node(name string) *guest.NodeInfo {
	return &guest.NodeInfo{NodeInfo: &abiv1.NodeInfo{Node: &abiv1.Node{Name: name}}}
}

func TestFilter(t *testing.T) {
	p, err := New(Settings{Nodes: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Filter(nil, node("a")); !s.IsSuccess() {
		t.Fatalf("a: %+v", s)
	}
	s := p.Filter(nil, node("c"))
	if s.Code != guest.UnschedulableAndUnresolvable || s.Reasons[0] != "nodepin: node is not one of the allowed nodes [a, b]" {
		t.Fatalf("c: %+v", s)
	}
}

func TestReasonSummarizesLongLists(t *testing.T) {
	p, _ := New(Settings{Nodes: []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7"}})
	want := "nodepin: node is not one of the allowed nodes [n1, n2, n3, n4, n5, and 2 more]"
	if got := p.Filter(nil, node("x")).Reasons[0]; got != want {
		t.Fatalf("reason %q, want %q", got, want)
	}
}

func TestSettingsValidation(t *testing.T) {
	for _, tc := range []struct {
		s    Settings
		want string
	}{
		{Settings{}, `"nodes" must list at least one node`},
		{Settings{Nodes: []string{"a", ""}}, `"nodes" contains an empty name`},
	} {
		if _, err := New(tc.s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.s, err, tc.want)
		}
	}
}

// The built module, through the host code the scheduler uses: the Go and
// TinyGo builds must give the same reports (testwasm.Agree).
func TestModuleThroughHost(t *testing.T) {
	testwasm.Agree(t, "examples/nodepin", moduleThroughHost)
}

func moduleThroughHost(t *testing.T, wasm []byte) []any {
	ctx := context.Background()
	var results []any
	in := eval.Input{}
	var err error
	if in.Pod, err = eval.ReadPod("testdata/pod.yaml"); err != nil {
		t.Fatal(err)
	}
	if in.Nodes, err = eval.ReadNodes("testdata/nodes.yaml"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		settings string
		passing  []string
	}{
		{"", []string{"k8s-node1"}},
		{`{"nodes": ["k8s-node2", "k8s-node3"]}`, []string{"k8s-node2", "k8s-node3"}},
	} {
		ev, err := eval.Load(ctx, []eval.PolicySpec{{Name: "nodepin", Wasm: wasm, Settings: []byte(tc.settings)}})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := ev.Evaluate(ctx, in)
		ev.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := rep.SortedNames("Success"); strings.Join(got, ",") != strings.Join(tc.passing, ",") {
			t.Errorf("settings %q: passing %v, want %v", tc.settings, got, tc.passing)
		}
		if rep.Selected != tc.passing[0] {
			t.Errorf("settings %q: selected %q", tc.settings, rep.Selected)
		}
		results = append(results, rep)
	}
	_, err = eval.Load(ctx, []eval.PolicySpec{{Name: "nodepin", Wasm: wasm, Settings: []byte(`{"nodes": ["a"], "typo": 1}`)}})
	if err == nil || !strings.Contains(err.Error(), `settings: json: unknown field "typo"`) {
		t.Fatalf("unknown setting: %v", err)
	}
	return append(results, testwasm.Unversioned(err))
}

func TestREADME(t *testing.T) { testwasm.CheckREADMEEval(t, "README.md", "nodepin") }
