//go:build !wasip1

package main

import (
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/guest"
	"github.com/wasmsched/wasmsched/guest/guesttest"
	"github.com/wasmsched/wasmsched/host/eval"
	"github.com/wasmsched/wasmsched/internal/hosttest"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func TestMain(m *testing.M) { testwasm.Main(m) }

const pkg = "examples/nodepin"

// node is a node named name, all nodepin reads of one.
func node(name string) *guest.NodeInfo { return guesttest.MakeNode().Name(name).Obj() }

func TestFilter(t *testing.T) {
	p, err := New(Settings{Nodes: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	guesttest.CheckStatus(t, p.Filter(nil, node("a")), guest.OK())
	guesttest.CheckStatus(t, p.Filter(nil, node("c")), guest.RejectUnresolvable("nodepin: node is not one of the allowed nodes [a, b]"))
}

func TestReasonSummarizesLongLists(t *testing.T) {
	p, _ := New(Settings{Nodes: []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7"}})
	guesttest.CheckStatus(t, p.Filter(nil, node("x")),
		guest.RejectUnresolvable("nodepin: node is not one of the allowed nodes [n1, n2, n3, n4, n5, and 2 more]"))
}

// TestTestdata runs Filter natively on the pod and nodes `wasmsched eval`
// reads in the README, under the settings it passes.
func TestTestdata(t *testing.T) {
	p := guesttest.Load(t, guesttest.ReadSettings(t, "testdata/settings.json"), DefaultSettings(), New)
	c := guesttest.NewCycle(guesttest.ReadPod(t, "testdata/pod.yaml"), guesttest.ReadNodes(t, "testdata/nodes.yaml")...)
	reject := guest.RejectUnresolvable("nodepin: node is not one of the allowed nodes [k8s-node2, k8s-node3]")
	for name, want := range map[string]guest.Status{"k8s-node1": reject, "k8s-node2": guest.OK(), "k8s-node3": guest.OK()} {
		n := c.NodeByName(name)
		if n == nil {
			t.Fatalf("no node %s in testdata/nodes.yaml", name)
		}
		t.Run(name, func(t *testing.T) { guesttest.CheckStatus(t, p.Filter(c, n), want) })
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
	testwasm.Agree(t, pkg, moduleThroughHost)
}

func moduleThroughHost(t *testing.T, wasm []byte) []*eval.Report {
	in := hosttest.Input(t, "testdata/pod.yaml", "testdata/nodes.yaml", "")
	var results []*eval.Report
	for _, tc := range []struct {
		settings string
		passing  []string
	}{
		{"", []string{"k8s-node1"}},
		{`{"nodes": ["k8s-node2", "k8s-node3"]}`, []string{"k8s-node2", "k8s-node3"}},
	} {
		rep := hosttest.Evaluate(t, hosttest.Evaluator(t, "nodepin", wasm, tc.settings), in)
		if got := rep.SortedNames("Success"); strings.Join(got, ",") != strings.Join(tc.passing, ",") {
			t.Errorf("settings %q: passing %v, want %v", tc.settings, got, tc.passing)
		}
		if rep.Selected != tc.passing[0] {
			t.Errorf("settings %q: selected %q", tc.settings, rep.Selected)
		}
		results = append(results, rep)
	}
	return results
}

func TestModuleRejectsBadSettings(t *testing.T) {
	hosttest.RejectsSettings(t, pkg, "nodepin", []hosttest.BadSettings{
		{Settings: `{"nodes": ["a"], "typo": 1}`, Want: `settings: json: unknown field "typo"`},
		{Settings: `{"nodes": []}`, Want: `"nodes" must list at least one node`},
	})
}

func TestREADME(t *testing.T) { testwasm.CheckREADMEEval(t, "README.md", "nodepin") }
