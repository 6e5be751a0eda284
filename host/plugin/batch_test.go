package plugin

import "testing"

// TestBatchFilters: the first filtering cycle batches; afterwards batching
// follows the average share of the snapshot the scheduler asked about.
func TestBatchFilters(t *testing.T) {
	var f filterShare
	if !f.next(0, 0) {
		t.Fatal("first cycle: no batch, want a batch (nothing known yet)")
	}
	if f.next(1000, 5000) {
		t.Fatal("after a cycle that asked about a fifth of the nodes: batch, want node by node")
	}
	// Cycles asking about every node bring the average above one half.
	got := []bool{}
	for i := 0; i < 4; i++ {
		got = append(got, f.next(5000, 5000))
	}
	if got[0] || !got[3] {
		t.Fatalf("batching over cycles asking about every node: %v, want false first and true by the fourth", got)
	}
	if v := f.v.Load() - 1; v < 500 || v > 1000 {
		t.Fatalf("average share %d thousandths, want 500..1000", v)
	}
}
