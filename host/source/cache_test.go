package source

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The cache returns what was put under its digest, refuses a file that
// holds other bytes, says "not cached" for a module it never had, and keeps
// at most MaxCached modules, the most recently written.
func TestCache(t *testing.T) {
	c, err := OpenCache(filepath.Join(t.TempDir(), "modules"))
	if err != nil {
		t.Fatal(err)
	}
	a, b := []byte("\x00asm module a"), []byte("\x00asm module b")
	if err := c.Put(a); err != nil {
		t.Fatal(err)
	}
	v, err := c.Get(Digest(a))
	if err != nil || string(v.Module) != string(a) || v.Digest != Digest(a) {
		t.Fatalf("Get(a) = %q, %v", v.Module, err)
	}
	if _, err := c.Get(Digest(b)); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "not in the scheduler's module cache") {
		t.Fatalf("Get(b) before Put: %v, want not cached", err)
	}
	if _, err := c.Get("../../etc/passwd"); err == nil || !strings.Contains(err.Error(), "not a sha256 digest") {
		t.Fatalf("Get of a path: %v", err)
	}
	// A planted file under a's name.
	if err := os.WriteFile(filepath.Join(c.Dir(), Digest(a)+".wasm"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(Digest(a)); err == nil || !strings.Contains(err.Error(), "holds a module of sha256 "+Digest(b)) {
		t.Fatalf("Get of a planted file: %v", err)
	}
	if err := c.Put(a); err != nil { // rewritten whole
		t.Fatal(err)
	}
	if v, err := c.Get(Digest(a)); err != nil || string(v.Module) != string(a) {
		t.Fatalf("Get(a) after Put over the planted file: %q, %v", v.Module, err)
	}

	now := time.Now()
	t.Cleanup(func() { timeNow = time.Now })
	var digests []string
	for i := range MaxCached + 3 {
		now = now.Add(time.Second)
		timeNow = func() time.Time { return now }
		m := []byte("\x00asm module " + strings.Repeat("x", i+1))
		if err := c.Put(m); err != nil {
			t.Fatal(err)
		}
		digests = append(digests, Digest(m))
	}
	entries, _ := os.ReadDir(c.Dir())
	if len(entries) != MaxCached {
		t.Fatalf("%d files cached, want %d", len(entries), MaxCached)
	}
	if _, err := c.Get(digests[len(digests)-1]); err != nil {
		t.Fatalf("the newest module was pruned: %v", err)
	}
	if _, err := c.Get(digests[0]); err == nil {
		t.Fatal("the oldest module was kept beyond MaxCached")
	}
}
