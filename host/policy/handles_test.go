package policy

import (
	"fmt"
	"sync"
	"testing"
)

// TestHandleTable: handles are dense, stable and found again, by any number
// of goroutines, whether a name sits in the immutable map or among the
// fresh ones.
func TestHandleTable(t *testing.T) {
	var tab handleTable
	const n = 5000
	got := make([]int32, n)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 8 {
				got[i] = tab.get(fmt.Sprint("node-", i))
			}
		}()
	}
	wg.Wait()
	seen := map[int32]bool{}
	for i, h := range got {
		if h < 0 || h >= n || seen[h] {
			t.Fatalf("node-%d: handle %d duplicated or outside 0..%d", i, h, n-1)
		}
		seen[h] = true
	}
	for round := 0; round < 3; round++ {
		for i := 0; i < n; i++ {
			name := fmt.Sprint("node-", i)
			if h, ok := tab.lookup(name); !ok || h != got[i] {
				t.Fatalf("round %d: lookup %s = %d %v, want %d", round, name, h, ok, got[i])
			}
			if h := tab.get(name); h != got[i] {
				t.Fatalf("round %d: get %s = %d, want %d", round, name, h, got[i])
			}
		}
	}
	if _, ok := tab.lookup("unknown"); ok {
		t.Fatal("lookup of an unknown name succeeded")
	}
	tab.mu.Lock()
	fresh := len(tab.fresh)
	tab.mu.Unlock()
	if fresh != 0 {
		t.Fatalf("%d names still on the locked path after repeated lookups", fresh)
	}
}
