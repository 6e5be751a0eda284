package compose

import "testing"

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
