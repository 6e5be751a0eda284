package image

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// options builds a two-architecture index of a small stand-in binary:
// the packing is what is tested here; test/e2e inspects and runs the
// image of a real kube-scheduler.
func options(t *testing.T) Options {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "kube-scheduler")
	if err := os.WriteFile(exe, []byte(strings.Repeat("not really a scheduler\n", 4096)), 0o755); err != nil {
		t.Fatal(err)
	}
	return Options{
		Version: "v0.1.0", Minor: "1.37", Source: "https://github.com/wasmsched/wasmsched", Revision: "abc",
		Created: time.Unix(1764000000, 0).UTC(), CABundle: exe,
		Images: []Image{{Arch: "amd64", Binary: exe}, {Arch: "arm64", Binary: exe}},
	}
}

// Two builds of the same inputs give the same digests, layout and
// archive; a different SOURCE_DATE_EPOCH gives another.
func TestReproducible(t *testing.T) {
	o := options(t)
	var digests []string
	var archives [][]byte
	for i := 0; i < 2; i++ {
		dir := t.TempDir()
		tags, err := WriteLayout(filepath.Join(dir, "oci"), []Options{o})
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteArchive(filepath.Join(dir, "oci"), filepath.Join(dir, "a.tar"), o.Created); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "a.tar"))
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, tags[0].Digest.String())
		archives = append(archives, b)
		if tags[0].Tag != "v0.1.0-k8s1.37" {
			t.Errorf("tag %s, want v0.1.0-k8s1.37", tags[0].Tag)
		}
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds gave %s and %s", digests[0], digests[1])
	}
	if string(archives[0]) != string(archives[1]) {
		t.Errorf("two builds gave different archives")
	}
	o.Created = o.Created.Add(time.Second)
	idx, err := Index(o)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := idx.Digest()
	if d.String() == digests[0] {
		t.Errorf("another creation time gave the same digest %s", d)
	}
}

// A layout whose blob does not match its digest, or is missing, is
// refused, naming the blob.
func TestVerifyRefusesTamperedBlobs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "oci")
	if _, err := WriteLayout(dir, []Options{options(t)}); err != nil {
		t.Fatal(err)
	}
	if err := Verify(dir); err != nil {
		t.Fatalf("a fresh layout: %v", err)
	}
	blobs, _ := filepath.Glob(filepath.Join(dir, "blobs", "sha256", "*"))
	// The largest blob is a layer: flip one byte, keep the size.
	var largest string
	var size int64
	for _, b := range blobs {
		if fi, _ := os.Stat(b); fi.Size() > size {
			largest, size = b, fi.Size()
		}
	}
	data, _ := os.ReadFile(largest)
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(largest, data, 0o644); err != nil {
		t.Fatal(err)
	}
	err := Verify(dir)
	if err == nil || !strings.Contains(err.Error(), filepath.Base(largest)) || !strings.Contains(err.Error(), "not the one that names it") {
		t.Fatalf("Verify of a tampered layer = %v, want an error naming sha256:%s", err, filepath.Base(largest))
	}
	t.Logf("tampered: %v", err)
	if err := os.Remove(largest); err != nil {
		t.Fatal(err)
	}
	if err := Verify(dir); err == nil || !strings.Contains(err.Error(), filepath.Base(largest)) {
		t.Fatalf("Verify of a layout missing a blob = %v", err)
	}
}
