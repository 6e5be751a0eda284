package source

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

const poll = 20 * time.Millisecond

func TestFileDeliversChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpu.wasm")
	v1, v2 := testwasm.FakeModule(1, 5000), testwasm.FakeModule(2, 6000)
	if err := os.WriteFile(path, v1, 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, NewFile(path, poll))
	seen := 0
	e := r.next(t, &seen, 5*time.Second)
	if e.version == nil || !bytes.Equal(e.version.Module, v1) || e.version.Digest != Digest(v1) || e.version.Origin != "file "+path {
		t.Fatalf("first event %s, want version %s from file %s", e, Digest(v1), path)
	}

	// Rewriting the same bytes (a new mtime) delivers nothing.
	touch(t, path, v1, time.Now().Add(time.Minute))
	r.quiet(t, seen, 10*poll)

	// A change is delivered once.
	touch(t, path, v2, time.Now().Add(2*time.Minute))
	e = r.next(t, &seen, 5*time.Second)
	if e.version == nil || !bytes.Equal(e.version.Module, v2) || e.version.Digest != Digest(v2) {
		t.Fatalf("after a change: %s, want version %s", e, Digest(v2))
	}
	r.quiet(t, seen, 10*poll)

	// Replaced by a rename (another inode, same size and mtime as before).
	tmp := path + ".tmp"
	v3 := testwasm.FakeModule(3, 6000)
	touch(t, tmp, v3, time.Now().Add(2*time.Minute))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	e = r.next(t, &seen, 5*time.Second)
	if e.version == nil || e.version.Digest != Digest(v3) {
		t.Fatalf("after a rename: %s, want version %s", e, Digest(v3))
	}
}

func TestFileMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpu.wasm")
	r := run(t, NewFile(path, poll))
	seen := 0
	e := r.next(t, &seen, 5*time.Second)
	if e.err == nil || !errors.Is(e.err, fs.ErrNotExist) || e.err.Error() != "file "+path+": stat "+path+": no such file or directory" {
		t.Fatalf("first event %s, want a not-found error", e)
	}
	// Reported once, not at every poll.
	r.quiet(t, seen, 10*poll)

	// The file appears: delivered.
	m := testwasm.FakeModule(1, 5000)
	if err := os.WriteFile(path, m, 0o644); err != nil {
		t.Fatal(err)
	}
	e = r.next(t, &seen, 5*time.Second)
	if e.version == nil || e.version.Digest != Digest(m) {
		t.Fatalf("after the file appeared: %s", e)
	}
	// Removed: an error again; back with the same bytes: delivered again,
	// since it repairs the failure; then nothing new.
	os.Remove(path)
	if e = r.next(t, &seen, 5*time.Second); e.err == nil {
		t.Fatalf("after removal: %s, want an error", e)
	}
	os.WriteFile(path, m, 0o644)
	if e = r.next(t, &seen, 5*time.Second); e.version == nil || e.version.Digest != Digest(m) {
		t.Fatalf("after the file came back: %s, want it delivered again", e)
	}
	r.quiet(t, seen, 10*poll)
}

func TestFileEmptyAndOversized(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpu.wasm")
	os.WriteFile(path, nil, 0o644)
	r := run(t, NewFile(path, poll))
	seen := 0
	if e := r.next(t, &seen, 5*time.Second); e.err == nil || e.err.Error() != "file "+path+": empty" {
		t.Fatalf("%s, want an empty-file error", e)
	}
	f, _ := os.OpenFile(path, os.O_WRONLY, 0)
	f.Truncate(MaxModuleSize + 1)
	f.Close()
	if e := r.next(t, &seen, 5*time.Second); e.err == nil || e.err.Error() != "file "+path+": oversized: more than the 67108864 bytes allowed" {
		t.Fatalf("%s, want an oversized error", e)
	}
}

func touch(t *testing.T, path string, b []byte, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}
