package lifecycle

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/host/source"
)

// A module pulled once is served from the module cache after a restart
// while the registry is down; a module never pulled is refused naming the
// registry's failure.
func TestOCIFetcherServesFromCacheWhenRegistryIsDown(t *testing.T) {
	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	// The registry's CA as an operator would hand it over (registryCA).
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := registryTransport(caFile)
	if err != nil {
		t.Fatal(err)
	}
	opts := source.OCIOptions{Transport: tr}
	host := strings.TrimPrefix(srv.URL, "https://")
	module, other := []byte("\x00asm\x01\x00\x00\x00cached"), []byte("\x00asm\x01\x00\x00\x00never pulled")
	ref, err := source.PushOCI(context.Background(), host+"/p/m:v1", module, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	otherRef, err := source.PushOCI(context.Background(), host+"/p/m:v2", other, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cache, err := source.OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := ociFetcher{cache: cache, opts: opts, logger: klog.Background()}
	v, err := f.fetch(context.Background(), "oci://"+ref.String(), source.Digest(module))
	if err != nil || string(v.Module) != string(module) || v.Origin != "oci "+ref.String() {
		t.Fatalf("cold pull: %v, origin %q", err, v.Origin)
	}
	// A static policy's source delivers the module once.
	got := make(chan source.Version, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ociSource{f: ociFetcher{opts: opts, logger: klog.Background()}, ref: "oci://" + otherRef.String(), sha256: source.Digest(other)}.Run(ctx,
			source.Handlers{Version: func(v source.Version) { got <- v }, Error: func(err error) { t.Errorf("static source: %v", err) }})
	}()
	if v := <-got; string(v.Module) != string(other) {
		t.Errorf("static source delivered %q", v.Module)
	}
	cancel()
	<-done
	srv.Close()
	// A new process: a new cache on the same directory.
	cache2, err := source.OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	f2 := ociFetcher{cache: cache2, opts: opts, logger: klog.Background()}
	v, err = f2.fetch(context.Background(), "oci://"+ref.String(), source.Digest(module))
	if err != nil || string(v.Module) != string(module) || !strings.Contains(v.Origin, "module cache") {
		t.Fatalf("registry down, cached: %v, origin %q", err, v.Origin)
	}
	_, err = f2.fetch(context.Background(), otherRef.String(), source.Digest(other))
	if err == nil || !strings.Contains(err.Error(), "oci "+otherRef.String()) || !strings.Contains(err.Error(), "connect") {
		t.Fatalf("registry down, not cached: %v", err)
	}
	if _, err := registryTransport(filepath.Join(dir, "nothing.pem")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing CA file: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "junk.pem"), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := registryTransport(filepath.Join(dir, "junk.pem")); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("junk CA file: %v", err)
	}
}
