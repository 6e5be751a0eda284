package source_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/wasmsched/wasmsched/host/source"
)

// ociRegistry is go-containerregistry's in-process registry behind TLS,
// with a hook that may answer a request in its place.
type ociRegistry struct {
	srv  *httptest.Server
	host string
	opts source.OCIOptions

	mu   sync.Mutex
	hook func(w http.ResponseWriter, r *http.Request) bool
}

func newOCIRegistry(t testing.TB) *ociRegistry {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	o := &ociRegistry{}
	o.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		hook := o.hook
		o.mu.Unlock()
		if hook != nil && hook(w, r) {
			return
		}
		reg.ServeHTTP(w, r)
	}))
	o.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	o.srv.StartTLS()
	t.Cleanup(o.srv.Close)
	o.host = strings.TrimPrefix(o.srv.URL, "https://")
	o.opts = source.OCIOptions{Transport: o.srv.Client().Transport}
	return o
}

func (o *ociRegistry) setHook(h func(w http.ResponseWriter, r *http.Request) bool) {
	o.mu.Lock()
	o.hook = h
	o.mu.Unlock()
}

func testModule(n int) []byte {
	b := append([]byte("\x00asm\x01\x00\x00\x00"), bytes.Repeat([]byte{'m'}, n)...)
	return b
}

func TestOCIPushFetch(t *testing.T) {
	o := newOCIRegistry(t)
	ctx := context.Background()
	module := testModule(1000)
	sum := source.Digest(module)
	pinned, err := source.PushOCI(ctx, o.host+"/policies/gpu:v1", module, map[string]string{source.OCIAnnotationABI: "1"}, o.opts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pinned.String(), o.host+"/policies/gpu@sha256:") {
		t.Fatalf("pinned reference %s", pinned)
	}
	v, err := source.FetchOCI(ctx, "oci://"+pinned.String(), sum, o.opts)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(v.Module, module) || v.Digest != sum || v.Origin != "oci "+pinned.String() {
		t.Fatalf("fetched %d bytes, digest %s, origin %q", len(v.Module), v.Digest, v.Origin)
	}
	// The manifest is an OCI 1.1 artifact of our type (what oras and
	// crane read).
	resp, err := o.srv.Client().Do(manifestRequest(t, o, "policies/gpu", "v1"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		MediaType, ArtifactType string
		Config                  struct{ MediaType string }
		Layers                  []struct{ MediaType, Digest string }
		Annotations             map[string]string
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.ArtifactType != source.OCIArtifactType ||
		m.Config.MediaType != "application/vnd.oci.empty.v1+json" || len(m.Layers) != 1 ||
		m.Layers[0].MediaType != source.OCILayerType || m.Layers[0].Digest != "sha256:"+sum ||
		m.Annotations[source.OCIAnnotationSHA256] != sum || m.Annotations[source.OCIAnnotationABI] != "1" {
		t.Fatalf("manifest %+v", m)
	}
	// Pull by tag resolves the digest.
	v2, d, err := source.PullOCI(ctx, o.host+"/policies/gpu:v1", o.opts)
	if err != nil || d.String() != pinned.String() || !bytes.Equal(v2.Module, module) {
		t.Fatalf("pull by tag: %v, %s", err, d)
	}
}

func manifestRequest(t *testing.T, o *ociRegistry, repo, ref string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, o.srv.URL+"/v2/"+repo+"/manifests/"+ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
	return req
}

func TestOCIReferences(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	for ref, want := range map[string]string{
		"oci://example.com/p/gpu:v1":        "not pinned",
		"example.com/p/gpu":                 "not pinned",
		"oci://":                            "empty",
		"oci://example.com/P@sha256:" + sum: "repository can only contain",
		"oci://example.com/p@sha256:abc":    "digest",
	} {
		_, err := source.FetchOCI(context.Background(), ref, sum, source.OCIOptions{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", ref, err, want)
		}
	}
	_, err := source.FetchOCI(context.Background(), "oci://example.com/p@sha256:"+sum, "xyz", source.OCIOptions{})
	if err == nil || !strings.Contains(err.Error(), `sha256 "xyz"`) {
		t.Errorf("bad module digest: %v", err)
	}
}

// TestOCIBadRegistry: each lie or failure of a registry is refused with an
// error naming it.
func TestOCIBadRegistry(t *testing.T) {
	o := newOCIRegistry(t)
	ctx := context.Background()
	module := testModule(2000)
	sum := source.Digest(module)
	pinned, err := source.PushOCI(ctx, o.host+"/policies/p:v1", module, nil, o.opts)
	if err != nil {
		t.Fatal(err)
	}
	other := testModule(3000)
	_, err = source.PushOCI(ctx, o.host+"/policies/p:other", other, nil, o.opts)
	if err != nil {
		t.Fatal(err)
	}
	blobPath := "/v2/policies/p/blobs/sha256:" + sum
	manifestPath := "/v2/policies/p/manifests/" + pinned.DigestStr()
	// serveManifest answers the pinned manifest with raw (the digest
	// header claims the pinned digest).
	serveManifest := func(raw string) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path != manifestPath {
				return false
			}
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Docker-Content-Digest", pinned.DigestStr())
			_, _ = io.WriteString(w, raw)
			return true
		}
	}
	manifest := func(artifact string, layers ...string) string {
		return fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":%q,`+
			`"config":{"mediaType":"application/vnd.oci.empty.v1+json","size":2,"digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},"layers":[%s]}`,
			artifact, strings.Join(layers, ","))
	}
	layer := func(mt string, size int64, digest string) string {
		return fmt.Sprintf(`{"mediaType":%q,"size":%d,"digest":"sha256:%s"}`, mt, size, digest)
	}
	good := layer(source.OCILayerType, int64(len(module)), sum)
	many := make([]string, 5000)
	for i := range many {
		many[i] = good
	}
	cases := []struct {
		name string
		hook func(w http.ResponseWriter, r *http.Request) bool
		sum  string
		want string
	}{
		{name: "another module's digest", sum: source.Digest(other),
			want: "the manifest's layer is sha256:" + sum + ", not the module sha256:" + source.Digest(other)},
		{name: "manifest other bytes", hook: serveManifest(manifest(source.OCIArtifactType, good) + " "),
			want: "does not match requested digest"},
		{name: "blob other bytes", hook: func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path != blobPath {
				return false
			}
			_, _ = w.Write(bytes.Repeat([]byte{'x'}, len(module)))
			return true
		}, want: "error verifying sha256 checksum after reading 2008 bytes"},
		{name: "blob shorter", hook: func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path != blobPath {
				return false
			}
			_, _ = w.Write(module[:10])
			return true
		}, want: "error verifying sha256 checksum after reading 10 bytes"},
		{name: "endless stream", hook: func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path != blobPath {
				return false
			}
			chunk := bytes.Repeat([]byte{'y'}, 1<<16)
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					break
				}
			}
			return true
		}, want: "the registry sent more than the 2008 bytes its descriptor says"},
		{name: "5xx", hook: func(w http.ResponseWriter, r *http.Request) bool {
			http.Error(w, "upstream on fire", http.StatusBadGateway)
			return true
		}, want: "502"},
		{name: "times out", hook: func(w http.ResponseWriter, r *http.Request) bool {
			<-r.Context().Done()
			return true
		}, want: "context deadline exceeded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o.setHook(c.hook)
			defer o.setHook(nil)
			opts := o.opts
			if c.name == "times out" {
				opts.Timeout = 200 * time.Millisecond
			}
			want := c.sum
			if want == "" {
				want = sum
			}
			_, err := source.FetchOCI(ctx, pinned.String(), want, opts)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "oci "+pinned.String()) {
				t.Fatalf("%v, want an error naming the reference and %q", err, c.want)
			}
		})
	}
	// Crafted manifests the checks refuse before any blob is read.
	crafted := []struct {
		name, raw, want string
	}{
		{"thousands of layers", manifest(source.OCIArtifactType, many...), "over the limit of 65536"},
		{"two layers", manifest(source.OCIArtifactType, good, good), "manifest has 2 layers"},
		{"another type", manifest("application/vnd.example.thing"), `artifact of type "application/vnd.example.thing"`},
		{"layer media type", manifest(source.OCIArtifactType, layer("application/vnd.oci.image.layer.v1.tar+gzip", int64(len(module)), sum)), "layer of media type"},
		{"layer too large", manifest(source.OCIArtifactType, layer(source.OCILayerType, source.MaxModuleSize+1, sum)), "over the module limit"},
	}
	for _, c := range crafted {
		t.Run(c.name, func(t *testing.T) {
			d := source.Digest([]byte(c.raw))
			path := "/v2/policies/p/manifests/sha256:" + d
			o.setHook(func(w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path != path {
					return false
				}
				w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
				_, _ = io.WriteString(w, c.raw)
				return true
			})
			defer o.setHook(nil)
			_, err := source.FetchOCI(ctx, o.host+"/policies/p@sha256:"+d, sum, o.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v, want an error with %q", err, c.want)
			}
		})
	}
	// A registry that is gone.
	o.srv.Close()
	if _, err := source.FetchOCI(ctx, pinned.String(), sum, o.opts); err == nil || !strings.Contains(err.Error(), "connect") {
		t.Fatalf("registry gone: %v", err)
	}
}

func TestDockerConfigKeychainBadInput(t *testing.T) {
	for in, want := range map[string]string{
		`{`:                          ".dockerconfigjson: unexpected end of JSON input",
		`{"auths":{}}`:               ".dockerconfigjson: no registry in auths",
		`{"auths":{"r":{"auth":1}}}`: ".dockerconfigjson: json",
	} {
		if _, err := source.DockerConfigKeychain([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

// BenchmarkOCIPull: a 3 MB module (a Go guest's size) pulled from a
// registry behind TLS on loopback (cold: what a scheduler does once per
// module) and read back from the module cache (what it does after).
func BenchmarkOCIPull(b *testing.B) {
	o := newOCIRegistry(b)
	module := testModule(3 << 20)
	sum := source.Digest(module)
	pinned, err := source.PushOCI(context.Background(), o.host+"/bench/m:v1", module, nil, o.opts)
	if err != nil {
		b.Fatal(err)
	}
	cache, err := source.OpenCache(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	if err := cache.Put(module); err != nil {
		b.Fatal(err)
	}
	b.Run("registry", func(b *testing.B) {
		for b.Loop() {
			if _, err := source.FetchOCI(context.Background(), pinned.String(), sum, o.opts); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cache", func(b *testing.B) {
		for b.Loop() {
			if _, err := cache.Get(sum); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What a cached module costs the scheduler with signatures: its
	// signatures read again from the registry (one signature here).
	if err := source.PushOCISignature(context.Background(), pinned, []byte(`{"critical":{}}`), []byte("sig"), o.opts); err != nil {
		b.Fatal(err)
	}
	b.Run("signatures", func(b *testing.B) {
		for b.Loop() {
			if sigs, err := source.FetchOCISignatures(context.Background(), pinned, o.opts); err != nil || len(sigs) != 1 {
				b.Fatal(len(sigs), err)
			}
		}
	})
}
