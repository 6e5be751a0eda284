package compose

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// TestScoredNodesIndex: Score and NormalizeScore find a node's position
// among PreScore's nodes from the order when it holds, by name when it
// does not, and report a node PreScore never saw.
func TestScoredNodesIndex(t *testing.T) {
	sn := &scoredNodes{names: []string{"a", "b", "c"}}
	for _, c := range []struct {
		k    int
		name string
		want int
		ok   bool
	}{
		{1, "b", 1, true},  // in order
		{-1, "c", 2, true}, // Score: anywhere
		{0, "c", 2, true},  // NormalizeScore out of order
		{5, "a", 0, true},  // beyond the list
		{0, "z", 0, false}, // never passed to PreScore
	} {
		if i, ok := sn.index(c.k, c.name); i != c.want || ok != c.ok {
			t.Errorf("index(%d, %q) = %d, %v; want %d, %v", c.k, c.name, i, ok, c.want, c.ok)
		}
	}
}

// TestNodeNames: the names PreScore keeps are the nodes' own, whatever
// the order the nodes come in, when a node object is replaced, and without
// a NodeNames.
func TestNodeNames(t *testing.T) {
	info := func(name string) fwk.NodeInfo {
		ni := framework.NewNodeInfo()
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		return ni
	}
	a, b, c := info("a"), info("b"), info("c")
	nn := &NodeNames{}
	for _, step := range []struct {
		what  string
		nodes []fwk.NodeInfo
		want  []string
	}{
		{"first", []fwk.NodeInfo{a, b, c}, []string{"a", "b", "c"}},
		{"reordered", []fwk.NodeInfo{c, a, b}, []string{"c", "a", "b"}},
		{"fewer", []fwk.NodeInfo{b}, []string{"b"}},
		{"b's object replaced", []fwk.NodeInfo{c, info("b"), a, info("d")}, []string{"c", "b", "a", "d"}},
	} {
		for _, n := range []*NodeNames{nn, nil} {
			got := make([]string, len(step.nodes))
			n.fill(got, step.nodes)
			if !slices.Equal(got, step.want) {
				t.Errorf("%s (NodeNames %v): %q, want %q", step.what, n != nil, got, step.want)
			}
		}
	}
}
