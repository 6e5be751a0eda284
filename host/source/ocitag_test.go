package source_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/host/source"
)

// TestOCIResolveTag: a tag resolves to the manifest it names now and the
// module in it; a tag moved to other bytes resolves to the new manifest; a
// pinned module the tag no longer holds, a missing tag, another kind of
// artifact and references that are not tags are refused, naming what is
// wrong.
func TestOCIResolveTag(t *testing.T) {
	o := newOCIRegistry(t)
	ctx := context.Background()
	m1, m2 := testModule(100), testModule(200)
	p1, err := source.PushOCI(ctx, o.host+"/policies/gpu:stable", m1, nil, o.opts)
	if err != nil {
		t.Fatal(err)
	}
	r, err := source.ResolveOCITag(ctx, "oci://"+o.host+"/policies/gpu:stable", "", o.opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.Pinned.String() != p1.String() || r.SHA256 != source.Digest(m1) || r.Tag.TagStr() != "stable" {
		t.Fatalf("resolved to %s (module %s), want %s (module %s)", r.Pinned, r.SHA256, p1, source.Digest(m1))
	}
	// Pinning the module it holds is allowed.
	if r, err := source.ResolveOCITag(ctx, o.host+"/policies/gpu:stable", source.Digest(m1), o.opts); err != nil || r.Pinned.String() != p1.String() {
		t.Fatalf("with the module pinned: %v, %s", err, r.Pinned)
	}
	// The tag moves.
	p2, err := source.PushOCI(ctx, o.host+"/policies/gpu:stable", m2, nil, o.opts)
	if err != nil {
		t.Fatal(err)
	}
	r, err = source.ResolveOCITag(ctx, "oci://"+o.host+"/policies/gpu:stable", "", o.opts)
	if err != nil || r.Pinned.String() != p2.String() || r.SHA256 != source.Digest(m2) {
		t.Fatalf("after the move: %v, %s (module %s), want %s", err, r.Pinned, r.SHA256, p2)
	}
	// The digest resolved before still pulls the first module.
	if v, err := source.FetchOCI(ctx, "oci://"+p1.String(), source.Digest(m1), o.opts); err != nil || string(v.Module) != string(m1) {
		t.Fatalf("pinned pull after the move: %v", err)
	}
	_, err = source.ResolveOCITag(ctx, o.host+"/policies/gpu:stable", source.Digest(m1), o.opts)
	if err == nil || !strings.Contains(err.Error(), "the tag names manifest "+p2.DigestStr()) || !strings.Contains(err.Error(), "not the module sha256:"+source.Digest(m1)) {
		t.Errorf("a pinned module the tag no longer holds: %v", err)
	}
	_, err = source.ResolveOCITag(ctx, o.host+"/policies/gpu:missing", "", o.opts)
	if err == nil || !strings.Contains(err.Error(), "resolving the tag") || !strings.Contains(err.Error(), "MANIFEST_UNKNOWN") {
		t.Errorf("a missing tag: %v", err)
	}
	o.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/v2/policies/gpu/manifests/image" {
			return false
		}
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		_, _ = w.Write([]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:` +
			strings.Repeat("a", 64) + `","size":2},"layers":[]}`))
		return true
	})
	_, err = source.ResolveOCITag(ctx, o.host+"/policies/gpu:image", "", o.opts)
	if err == nil || !strings.Contains(err.Error(), `manifest is an artifact of type "application/vnd.oci.image.config.v1+json"`) {
		t.Errorf("a tag naming a container image: %v", err)
	}
	for ref, want := range map[string]string{
		o.host + "/policies/gpu":            "no tag: write the tag out",
		"oci://" + p1.String():              "names a digest, not a tag",
		"oci://":                            "empty",
		"oci://example.com/P:v1":            "repository can only contain",
		o.host + "/policies/gpu:" + "v1/x2": "no tag",
	} {
		if _, err := source.ResolveOCITag(ctx, ref, "", o.opts); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", ref, err, want)
		}
	}
	if _, err := source.ResolveOCITag(ctx, o.host+"/policies/gpu:stable", "xyz", o.opts); err == nil || !strings.Contains(err.Error(), `sha256 "xyz"`) {
		t.Errorf("bad module digest: %v", err)
	}
	// Without the opt-in, a pull names it.
	if _, err := source.FetchOCI(ctx, "oci://"+o.host+"/policies/gpu:stable", source.Digest(m2), o.opts); err == nil || !strings.Contains(err.Error(), "not pinned") || !strings.Contains(err.Error(), "allowTag") {
		t.Errorf("a tag pulled as if pinned: %v", err)
	}
}
