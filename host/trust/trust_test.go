package trust_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/host/trust"
)

func keys(t *testing.T) (ec, ed crypto.Signer) {
	e, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, d, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return e, d
}

func sign(t *testing.T, k crypto.Signer, msg []byte, from string) source.Signature {
	sig, err := trust.Sign(k, msg)
	if err != nil {
		t.Fatal(err)
	}
	return source.Signature{Signature: sig, From: from}
}

// Blob signatures (file, URL, ConfigMaps): each way a module can be
// refused says why; two keys are accepted at once; a policy narrows.
func TestCheckBlob(t *testing.T) {
	ec, ed := keys(t)
	rotatedOut, _ := keys(t)
	module := []byte("\x00asm\x01\x00\x00\x00module")
	v := func(sigs ...source.Signature) source.Version {
		return source.Version{Module: module, Digest: source.Digest(module), Signatures: sigs}
	}
	p := &trust.Policy{Required: true, Keys: []trust.Key{{Name: "old", Public: ec.Public()}, {Name: "new", Public: ed.Public()}}}
	for _, tc := range []struct {
		name   string
		v      source.Version
		demand []string
		key    string // the key that verifies; "" : refused
		err    string
	}{
		{name: "ecdsa", v: v(sign(t, ec, module, "f")), key: "old"},
		{name: "ed25519", v: v(sign(t, ed, module, "f")), key: "new"},
		{name: "one of two signatures", v: v(sign(t, rotatedOut, module, "a"), sign(t, ed, module, "b")), key: "new"},
		{name: "unsigned", v: v(), err: "is not signed (no signature beside it); a signature by key old ("},
		{name: "rotated out", v: v(sign(t, rotatedOut, module, "sig.a")), err: "sig.a: does not verify over the module's bytes with any trusted key: made by another key, or over other bytes"},
		{name: "other bytes", v: v(sign(t, ec, []byte("other"), "sig.b")), err: "sig.b: does not verify over the module's bytes"},
		{name: "narrowed to new", v: v(sign(t, ec, module, "sig.c")), demand: []string{"new"}, err: "verifies with key new ("},
		{name: "narrowed, right key", v: v(sign(t, ed, module, "f")), demand: []string{"new"}, key: "new"},
		{name: "demand widens", v: v(sign(t, ed, module, "f")), demand: []string{"mine"}, err: `the policy demands key "mine", which the cluster's trust policy does not list`},
		{name: "image signature beside a file", v: v(source.Signature{Payload: trust.SimpleSigningPayload("r/p", "sha256:"+strings.Repeat("a", 64)), Signature: []byte{1}, From: "x"}), err: "x: an image signature (for manifest sha256:aaaa"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Check(tc.v, tc.demand)
			if tc.key != "" {
				if err != nil || got.Key == nil || got.Key.Name != tc.key {
					t.Fatalf("want key %s, got %+v, %v", tc.key, got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "untrusted: ") {
				t.Fatalf("want an error containing %q, got %v", tc.err, err)
			}
		})
	}
	// Optional: an unsigned module loads; a bad signature is still refused.
	opt := &trust.Policy{Keys: p.Keys}
	if got, err := opt.Check(v(), nil); err != nil || !got.Unsigned {
		t.Errorf("optional, unsigned: %+v, %v", got, err)
	}
	if _, err := opt.Check(v(sign(t, rotatedOut, module, "s")), nil); err == nil {
		t.Error("optional, a signature by another key: accepted")
	}
	if _, err := opt.Check(v(), []string{"new"}); err == nil || !strings.Contains(err.Error(), "is not signed") {
		t.Errorf("optional narrowed by a policy, unsigned: %v", err)
	}
}

func TestParsePublicKey(t *testing.T) {
	ec, ed := keys(t)
	for _, k := range []crypto.Signer{ec, ed} {
		b, err := trust.MarshalPublicKey(k.Public())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := trust.ParsePublicKey(b); err != nil {
			t.Errorf("%T: %v", k, err)
		}
	}
	rk, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(ec)
	for _, tc := range []struct {
		pem  []byte
		want string
	}{
		{[]byte("junk"), "no PEM block"},
		{pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), `PEM block "PRIVATE KEY", not a PUBLIC KEY`},
		{mustPub(t, rk.Public()), "only ECDSA P-256 and Ed25519"},
		{mustPub(t, p384.Public()), "an ECDSA key on P-384: only P-256"},
		{append(mustPub(t, ec.Public()), mustPub(t, ed.Public())...), "more than one PEM block"},
	} {
		if _, err := trust.ParsePublicKey(tc.pem); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want %q, got %v", tc.want, err)
		}
	}
}

func mustPub(t *testing.T, k crypto.PublicKey) []byte {
	b, err := trust.MarshalPublicKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Image signatures in a registry: stored at the .sig tag, read back with
// the module, checked against the manifest digest; a signature copied from
// another artifact is for another digest.
func TestCheckOCI(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	ec, ed := keys(t)
	module, other := []byte("\x00asm\x01\x00\x00\x00signed"), []byte("\x00asm\x01\x00\x00\x00other")
	d, err := source.PushOCI(ctx, host+"/p/m:v1", module, nil, source.OCIOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d2, err := source.PushOCI(ctx, host+"/p/m:v2", other, nil, source.OCIOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := &trust.Policy{Required: true, Keys: []trust.Key{{Name: "release", Public: ec.Public()}}}
	fetch := func(d interface{ String() string }, m []byte) source.Version {
		v, err := source.FetchOCI(ctx, d.String(), source.Digest(m), source.OCIOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if _, err := p.Check(fetch(d, module), nil); err == nil || !strings.Contains(err.Error(), "is not signed") {
		t.Fatalf("unsigned artifact: %v", err)
	}
	// Signed with another key first, then with the trusted one: both stay.
	for _, k := range []crypto.Signer{ed, ec} {
		payload := trust.SimpleSigningPayload(d.Context().Name(), d.DigestStr())
		sig, err := trust.Sign(k, payload)
		if err != nil {
			t.Fatal(err)
		}
		if err := source.PushOCISignature(ctx, d, payload, sig, source.OCIOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	v := fetch(d, module)
	if len(v.Signatures) != 2 || v.Manifest != d.DigestStr() {
		t.Fatalf("signatures read: %d, manifest %s", len(v.Signatures), v.Manifest)
	}
	if got, err := p.Check(v, nil); err != nil || got.Key.Name != "release" {
		t.Fatalf("signed artifact: %+v, %v", got, err)
	}
	// The first artifact's signature payload, signed by the trusted key,
	// put beside the second: it vouches for another digest.
	payload := trust.SimpleSigningPayload(d.Context().Name(), d.DigestStr())
	sig, _ := trust.Sign(ec, payload)
	if err := source.PushOCISignature(ctx, d2, payload, sig, source.OCIOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = p.Check(fetch(d2, other), nil)
	if want := "the signature vouches for manifest " + d.DigestStr() + ", not this artifact's " + d2.DigestStr(); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("signature for another digest: want %q, got %v", want, err)
	}
	if !strings.Contains(err.Error(), source.OCISignatureTag(d2).String()+" layer 0") {
		t.Errorf("the error does not name the signature: %v", err)
	}
	// The tag moved after the first artifact was pinned: what the pinned
	// reference names, and its signatures, do not change.
	if _, err := source.PushOCI(ctx, host+"/p/m:v1", other, nil, source.OCIOptions{}); err != nil {
		t.Fatal(err)
	}
	if v := fetch(d, module); string(v.Module) != string(module) {
		t.Fatal("the pinned reference followed the moved tag")
	} else if got, err := p.Check(v, nil); err != nil || got.Key.Name != "release" {
		t.Errorf("after the tag moved: %+v, %v", got, err)
	}
	// A signature image that is not cosign's is a failed fetch naming it.
	bad := []byte("not a payload")
	if err := source.PushOCISignature(ctx, d2, bad, nil, source.OCIOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := source.FetchOCI(ctx, d2.String(), source.Digest(other), source.OCIOptions{}); err == nil || !strings.Contains(err.Error(), "annotation dev.cosignproject.cosign/signature is missing or not base64") {
		t.Errorf("a signature layer without its signature: %v", err)
	}
}
