package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/host/trust"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// push --key signs what it pushes, where the scheduler looks for it: the
// chunk 0 annotation of content-addressed and fixed-name chunks (a second
// key's signature added beside the first), the .sig tag of an artifact,
// whose manifest carries the ABI, SDK and settings schema annotations.
func TestPushSigned(t *testing.T) {
	pc := policyEnv(t)
	dir := t.TempDir()
	wasm := testwasm.Path(t, "examples/nodepin")
	module, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	keyA, keyB := filepath.Join(dir, "a.key"), filepath.Join(dir, "b.key")
	for _, args := range [][]string{{"--key", keyA}, {"--key", keyB, "--algorithm", "ed25519"}} {
		if code, _, errs := runCLI(append([]string{"sign", "--generate-key"}, args...)...); code != 0 {
			t.Fatalf("sign --generate-key: exit %d: %s", code, errs)
		}
	}
	policy := &trust.Policy{Required: true}
	for _, k := range []string{"a", "b"} {
		b, err := os.ReadFile(filepath.Join(dir, k+".pub"))
		if err != nil {
			t.Fatal(err)
		}
		pub, err := trust.ParsePublicKey(b)
		if err != nil {
			t.Fatal(err)
		}
		policy.Keys = append(policy.Keys, trust.Key{Name: k, Public: pub})
	}
	check := func(what string, v source.Version, keys ...string) {
		t.Helper()
		for _, k := range keys {
			if got, err := policy.Check(v, []string{k}); err != nil || got.Key.Name != k {
				t.Errorf("%s: key %s: %+v, %v", what, k, got, err)
			}
		}
	}

	// SchedulingPolicy: content-addressed chunks, signed with a, then with b.
	pc.ok("push", wasm, "--name", "pin", "--key", keyA)
	out := pc.ok("push", wasm, "--name", "pin", "--key", keyB)
	if !strings.Contains(out, "signed") {
		t.Errorf("the second push's output does not say it signed the chunks:\n%s", out)
	}
	v, err := source.FetchModule(context.Background(), pc.client, defaultNamespace, source.Digest(module))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Signatures) != 2 {
		t.Fatalf("chunk 0 carries %d signatures, want 2", len(v.Signatures))
	}
	check("content-addressed chunks", v, "a", "b")

	// Fixed-name chunks.
	pc.ok("push", "--configmaps", wasm, "--name", "static", "--key", keyA)
	cm, err := pc.client.CoreV1().ConfigMaps(defaultNamespace).Get(context.Background(), "static-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sigs, err := source.ParseSignatures(cm.Annotations[source.AnnotationSignature], "static-0")
	if err != nil {
		t.Fatal(err)
	}
	check("fixed-name chunks", source.Version{Module: module, Digest: source.Digest(module), Signatures: sigs}, "a")

	// An artifact, with its annotations.
	host, ca := startRegistry(t, dir)
	schema := filepath.Join(dir, "schema.json")
	if err := os.WriteFile(schema, []byte(`{"type": "object",
	  "properties": {"nodes": {"type": "array"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI("push", "--oci", host+"/p/pin:v1", wasm, "--key", keyB, "--settings-schema", schema, "--registry-ca", ca)
	if code != 0 {
		t.Fatalf("push --oci --key: exit %d: %s", code, errs)
	}
	_, rest, _ := strings.Cut(out, "pushed ")
	d, err := name.NewDigest(strings.Fields(rest)[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "signed with key ") || !strings.Contains(out, source.OCISignatureTag(d).String()) {
		t.Errorf("push --oci --key printed:\n%s", out)
	}
	opts, err := ociOptions(ca, 0)
	if err != nil {
		t.Fatal(err)
	}
	v, err = source.FetchOCI(context.Background(), d.String(), source.Digest(module), opts)
	if err != nil {
		t.Fatal(err)
	}
	check("artifact", v, "b")
	desc, err := remote.Get(d, remote.WithTransport(opts.Transport))
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Annotations map[string]string }
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{source.OCIAnnotationABI: "1", source.OCIAnnotationSDK: "wasmsched-go-sdk/1",
		source.OCIAnnotationSchema: `{"type":"object","properties":{"nodes":{"type":"array"}}}`} {
		if m.Annotations[k] != want {
			t.Errorf("annotation %s = %q, want %q", k, m.Annotations[k], want)
		}
	}
}
