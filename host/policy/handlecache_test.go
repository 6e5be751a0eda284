package policy

import (
	"fmt"
	"strings"
	"testing"
)

// TestHandleCache: a member's cache answers what the table answers, for
// the same string, for an equal string with other bytes, for a prefix
// sharing bytes with a longer name, and while the table grows past the
// cache's size.
func TestHandleCache(t *testing.T) {
	var tab handleTable
	m := &member{}
	names := make([]string, 5000)
	for i := range names {
		names[i] = fmt.Sprintf("node-%05d", i)
	}
	for round := range 3 {
		for i, name := range names {
			if got, want := m.handle(&tab, name), tab.get(name); got != want || got != int32(i) {
				t.Fatalf("round %d: handle(%q) = %d, table %d, want %d", round, name, got, want, i)
			}
		}
	}
	// The same name in other bytes (a replaced node object) and a prefix
	// of a longer name's bytes.
	copied := strings.Clone(names[42])
	if got := m.handle(&tab, copied); got != 42 {
		t.Fatalf("handle(copy of %q) = %d, want 42", copied, got)
	}
	long := "node-00042-extra"
	if got, want := m.handle(&tab, long[:10]), int32(42); got != want {
		t.Fatalf("handle(prefix %q) = %d, want %d", long[:10], got, want)
	}
	if got := m.handle(&tab, long); got != 5000 {
		t.Fatalf("handle(%q) = %d, want a new handle 5000", long, got)
	}
	if got := m.handle(&tab, ""); got != tab.get("") {
		t.Fatalf(`handle("") = %d, table %d`, got, tab.get(""))
	}
}
