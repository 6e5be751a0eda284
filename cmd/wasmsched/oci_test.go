package main

import (
	"bytes"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// push --oci publishes a module to a registry behind TLS and pull writes
// it back; a module that does not load is not pushed.
func TestPushPullOCI(t *testing.T) {
	dir := t.TempDir()
	host, ca := startRegistry(t, dir)
	wasm := testwasm.Path(t, "examples/nodepin")
	module, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	sum := source.Digest(module)
	var out, errOut bytes.Buffer
	if code := run([]string{"push", "--oci", "oci://" + host + "/policies/nodepin:v1", "--registry-ca", ca, wasm}, &out, &errOut); code != 0 {
		t.Fatalf("push --oci: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "sha256: "+sum) || !strings.Contains(out.String(), "oci: oci://"+host+"/policies/nodepin@sha256:") {
		t.Fatalf("push --oci printed %q", out.String())
	}
	pulled := filepath.Join(dir, "pulled.wasm")
	out.Reset()
	if code := run([]string{"pull", host + "/policies/nodepin:v1", "-o", pulled, "--registry-ca", ca}, &out, &errOut); code != 0 {
		t.Fatalf("pull: exit %d: %s", code, errOut.String())
	}
	if b, _ := os.ReadFile(pulled); !bytes.Equal(b, module) || !strings.Contains(out.String(), "sha256: "+sum) {
		t.Fatalf("pulled %d bytes (want %d): %q", len(b), len(module), out.String())
	}

	junk := filepath.Join(dir, "junk.wasm")
	if err := os.WriteFile(junk, []byte("\x00asm\x01\x00\x00\x00 junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"push", "--oci", host + "/policies/junk:v1", "--registry-ca", ca, junk}, "junk.wasm does not load, nothing pushed"},
		{[]string{"push", "--oci", host + "/policies/nodepin:v1", wasm}, "certificate"},
		{[]string{"push", "--oci", host + "/policies/nodepin:v1", "--registry-ca", junk, wasm}, "no PEM certificate"},
		{[]string{"pull", host + "/policies/absent:v1", "-o", pulled, "--registry-ca", ca}, "NAME_UNKNOWN"},
		{[]string{"pull", host + "/policies/nodepin:v1", "--registry-ca", ca}, "-o FILE is required"},
	} {
		errOut.Reset()
		if code := run(tc.args, io.Discard, &errOut); code == 0 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}

// startRegistry starts an in-process OCI registry behind TLS, stopped when
// t ends, and returns its host and the path of its CA certificate, written
// in dir.
func startRegistry(t *testing.T, dir string) (host, caFile string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(srv.URL, "https://"), caFile
}
