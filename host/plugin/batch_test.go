package plugin

import "testing"

// TestBatchFilters: the first filtering cycle batches; afterwards batching
// follows the average share of the snapshot the scheduler asked about.
func TestBatchFilters(t *testing.T) {
	s := &Slot{}
	cycle := func(asked, nodes int) bool {
		e := &entry{slot: s}
		batch := s.batchFilters(e, nodes)
		e.asked.Add(int64(asked))
		return batch
	}
	if !cycle(1000, 5000) {
		t.Fatal("first cycle: no batch, want a batch (nothing known yet)")
	}
	if cycle(1000, 5000) {
		t.Fatal("after a cycle that asked about a fifth of the nodes: batch, want node by node")
	}
	// Cycles asking about every node bring the average above one half.
	got := []bool{}
	for i := 0; i < 4; i++ {
		got = append(got, cycle(5000, 5000))
	}
	if got[0] || !got[3] {
		t.Fatalf("batching over cycles asking about every node: %v, want false first and true by the fourth", got)
	}
	if v := s.filterShare.Load() - 1; v < 500 || v > 1000 {
		t.Fatalf("average share %d thousandths, want 500..1000", v)
	}
}

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
