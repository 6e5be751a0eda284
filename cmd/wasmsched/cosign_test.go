package main

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	sigstoresig "github.com/sigstore/sigstore/pkg/signature"

	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// Our signatures are cosign's: cosign's own packages (test-only: they are
// not linked into wasmsched or the scheduler) verify what wasmsched sign
// writes, blob and image signatures, for a key cosign generated (its
// encrypted format) and for wasmsched's own ECDSA and Ed25519 keys; and
// wasmsched verify accepts a signature cosign made.
func TestSignaturesAreCosigns(t *testing.T) {
	dir := t.TempDir()
	host, ca := startRegistry(t, dir)
	wasm := testwasm.Path(t, "examples/nodepin")
	module, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("COSIGN_PASSWORD", "correct horse")
	// A key pair cosign generated, encrypted as cosign encrypts it.
	kb, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte("correct horse"), nil })
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][2]string{} // name -> private, public
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keys["cosign"] = [2]string{write("cosign.key", kb.PrivateBytes), write("cosign.pub", kb.PublicBytes)}
	for _, alg := range []string{"ecdsa-p256", "ed25519"} {
		k := filepath.Join(dir, alg+".key")
		var out, errOut bytes.Buffer
		if code := run([]string{"sign", "--generate-key", "--key", k, "--algorithm", alg}, &out, &errOut); code != 0 {
			t.Fatalf("sign --generate-key %s: exit %d: %s", alg, code, errOut.String())
		}
		keys[alg] = [2]string{k, filepath.Join(dir, alg+".pub")}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"push", "--oci", host + "/policies/nodepin:v1", "--registry-ca", ca, wasm}, &out, &errOut); code != 0 {
		t.Fatalf("push --oci: exit %d: %s", code, errOut.String())
	}
	_, rest, _ := strings.Cut(out.String(), "pushed ")
	ref, err := name.NewDigest(strings.Fields(rest)[0])
	if err != nil {
		t.Fatal(err)
	}
	opts, err := ociOptions(ca, 0)
	if err != nil {
		t.Fatal(err)
	}
	for kname, k := range keys {
		t.Run(kname, func(t *testing.T) {
			pub, err := os.ReadFile(k[1])
			if err != nil {
				t.Fatal(err)
			}
			// What cosign's LoadPublicKeyRaw does, without its package:
			// that one links cosign's GitHub, GitLab and Kubernetes key
			// stores (15 packages, 4 MB of source to compile).
			pubKey, err := cryptoutils.UnmarshalPEMToPublicKey(pub)
			if err != nil {
				t.Fatal(err)
			}
			verifier, err := sigstoresig.LoadVerifier(pubKey, crypto.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			co := &cosign.CheckOpts{SigVerifier: verifier, IgnoreTlog: true, IgnoreSCT: true, Offline: true,
				ClaimVerifier:      cosign.SimpleClaimVerifier,
				RegistryClientOpts: []ociremote.Option{ociremote.WithRemoteOptions(remote.WithTransport(opts.Transport))}}
			// A blob signature beside a file (cosign verify-blob checks no
			// claims: the payload is the blob).
			blobCO := *co
			blobCO.ClaimVerifier = nil
			file := write(kname+".wasm", module)
			var out, errOut bytes.Buffer
			if code := run([]string{"sign", "--key", k[0], file}, &out, &errOut); code != 0 {
				t.Fatalf("sign: exit %d: %s", code, errOut.String())
			}
			b64, err := os.ReadFile(file + ".sig")
			if err != nil {
				t.Fatal(err)
			}
			sig, err := static.NewSignature(module, strings.TrimSpace(string(b64)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cosign.VerifyBlobSignature(context.Background(), sig, &blobCO); err != nil {
				t.Errorf("cosign refuses wasmsched's blob signature: %v", err)
			}
			other, _ := static.NewSignature(append([]byte("x"), module...), strings.TrimSpace(string(b64)))
			if _, err := cosign.VerifyBlobSignature(context.Background(), other, &blobCO); err == nil {
				t.Error("cosign accepts the signature over other bytes")
			}
			// An image signature at the .sig tag.
			if code := run([]string{"sign", "--key", k[0], "--oci", ref.String(), "--registry-ca", ca}, &out, &errOut); code != 0 {
				t.Fatalf("sign --oci: exit %d: %s", code, errOut.String())
			}
			checked, _, err := cosign.VerifyImageSignatures(context.Background(), ref, co)
			if err != nil || len(checked) == 0 {
				t.Errorf("cosign refuses wasmsched's image signature: %d checked, %v", len(checked), err)
			}
			// wasmsched verify, as the scheduler would.
			out.Reset()
			if code := run([]string{"verify", "--key", k[1], ref.String(), "--registry-ca", ca}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "verified: module sha256:"+source.Digest(module)) {
				t.Errorf("verify %s: exit %d: %s%s", ref, code, out.String(), errOut.String())
			}
		})
	}
	// A signature cosign made (as cosign sign-blob does) passes wasmsched
	// verify; the same signature beside other bytes does not.
	sv, err := cosign.LoadPrivateKey(kb.PrivateBytes, []byte("correct horse"), nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sv.SignMessage(bytes.NewReader(module))
	if err != nil {
		t.Fatal(err)
	}
	file := write("by-cosign.wasm", module)
	write("by-cosign.wasm.sig", []byte(base64.StdEncoding.EncodeToString(raw)))
	out.Reset()
	if code := run([]string{"verify", "--key", keys["cosign"][1], file}, &out, &errOut); code != 0 {
		t.Errorf("verify of cosign's signature: exit %d: %s", code, errOut.String())
	}
	otherFile := write("other.wasm", append([]byte("x"), module...))
	write("other.wasm.sig", []byte(base64.StdEncoding.EncodeToString(raw)))
	errOut.Reset()
	if code := run([]string{"verify", "--key", keys["cosign"][1], otherFile}, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "does not verify over the module's bytes with any trusted key") {
		t.Errorf("verify of a signature over other bytes: exit %d: %s", code, errOut.String())
	}
	// The wrong key, and a key rotated out (another trusted key only).
	errOut.Reset()
	if code := run([]string{"verify", "--key", keys["ed25519"][1], file}, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "no signature of module sha256:") {
		t.Errorf("verify with the wrong key: exit %d: %s", code, errOut.String())
	}
	// A wrong password, a public key given as the private one.
	t.Setenv("COSIGN_PASSWORD", "wrong")
	errOut.Reset()
	if code := run([]string{"sign", "--key", keys["cosign"][0], file}, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "wrong COSIGN_PASSWORD?") {
		t.Errorf("sign with a wrong password: exit %d: %s", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"sign", "--key", keys["cosign"][1], file}, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "a public key; signing needs the private key") {
		t.Errorf("sign with the public key: exit %d: %s", code, errOut.String())
	}
}
