package lifecycle

import "testing"

// A static policy's source is published for `wasmsched explain` with a
// URL's password redacted; a SchedulingPolicy's slot publishes none.
func TestPublishedSource(t *testing.T) {
	if got := publishedSource(Source{}); got != nil {
		t.Errorf("empty source published as %+v", got)
	}
	got := publishedSource(Source{URL: "https://user:s3cret@policies.example.com/gpu.wasm", SHA256: "ab"})
	if got == nil || got.URL != "https://user:xxxxx@policies.example.com/gpu.wasm" || got.SHA256 != "ab" {
		t.Errorf("url source published as %+v", got)
	}
	if got := publishedSource(Source{ConfigMap: "gpu"}); got == nil || got.ConfigMap != "gpu" {
		t.Errorf("configMap source published as %+v", got)
	}
	if k := StateKey("wasm sched", "gpu"); k != "wasm_sched.gpu.json" {
		t.Errorf("StateKey: %q", k)
	}
}
