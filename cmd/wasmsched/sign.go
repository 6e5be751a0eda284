package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"

	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/host/trust"
)

const signUsage = `Usage:
  wasmsched sign --generate-key --key K.key [--algorithm ecdsa-p256|ed25519]
  wasmsched sign --key K.key P.wasm
  wasmsched sign --key K.key --oci REGISTRY/REPO@sha256:... [--registry-ca FILE]

Signs a policy module as cosign does (docs/policy-oci.md):
  P.wasm            a blob signature over the module's bytes, written base64
                    to P.wasm.sig (what the scheduler reads beside a file or
                    URL module; for ConfigMap chunks, put it in the annotation
                    wasmsched.io/signature of chunk 0), and printed;
  --oci REF         an image signature (a simple-signing payload naming the
                    artifact's manifest digest) added to the signature image at
                    REPO:sha256-<hex>.sig, beside the signatures already there.
The key is a PEM private key: PKCS#8 or EC (ECDSA P-256, Ed25519), or
cosign's encrypted key (cosign generate-key-pair), whose password is read
from $COSIGN_PASSWORD. --generate-key writes K.key (encrypted in cosign's
format when $COSIGN_PASSWORD is set) and K.pub, the public key a trust
policy lists.

`

func runSign(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sign", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, signUsage)
		fs.PrintDefaults()
	}
	keyFile := fs.String("key", "", "the private key (PEM)")
	generate := fs.Bool("generate-key", false, "write a new key pair to --key and its .pub beside it")
	alg := fs.String("algorithm", "ecdsa-p256", "with --generate-key: ecdsa-p256 or ed25519")
	ociRef := fs.String("oci", "", "sign this OCI artifact (pinned by digest) instead of a file")
	caFile := fs.String("registry-ca", "", "PEM file of CA certificates trusted besides the system roots")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if *keyFile == "" {
		return errors.New("--key is needed")
	}
	if *generate {
		if len(pos) > 0 || *ociRef != "" {
			return errors.New("--generate-key writes a key pair and signs nothing: sign with a second command")
		}
		return generateKey(*keyFile, *alg, stdout)
	}
	key, err := readPrivateKey(*keyFile)
	if err != nil {
		return err
	}
	switch {
	case *ociRef != "" && len(pos) == 0:
		opts, err := ociOptions(*caFile, *timeout)
		if err != nil {
			return err
		}
		d, err := source.ParseOCIReference(*ociRef)
		if err != nil {
			return err
		}
		payload := trust.SimpleSigningPayload(d.Context().Name(), d.DigestStr())
		sig, err := trust.Sign(key, payload)
		if err != nil {
			return err
		}
		if err := source.PushOCISignature(context.Background(), d, payload, sig, opts); err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "signed %s with key %s: %s\n", d, trust.KeyID(key.Public()), source.OCISignatureTag(d))
		return err
	case *ociRef == "" && len(pos) == 1:
		path := pos[0]
		module, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sig, err := trust.Sign(key, module)
		if err != nil {
			return err
		}
		b64 := base64.StdEncoding.EncodeToString(sig)
		if err := os.WriteFile(path+source.SignatureSuffix, []byte(b64+"\n"), 0o644); err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "signed %s (sha256 %s) with key %s: %s%s\n%s\n", path, source.Digest(module), trust.KeyID(key.Public()), path, source.SignatureSuffix, b64)
		return err
	default:
		fs.Usage()
		return errUsage
	}
}

// generateKey writes a key pair: path (the private key, PKCS#8, encrypted
// as cosign encrypts it when $COSIGN_PASSWORD is set) and path's .pub.
func generateKey(path, alg string, stdout io.Writer) error {
	var priv crypto.Signer
	switch alg {
	case "ecdsa-p256":
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		priv = k
	case "ed25519":
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		priv = k
	default:
		return fmt.Errorf("--algorithm %q: ecdsa-p256 or ed25519", alg)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return err
	}
	block := &pem.Block{Type: "PRIVATE KEY", Bytes: der}
	if pass, ok := os.LookupEnv("COSIGN_PASSWORD"); ok && pass != "" {
		enc, err := encrypted.Encrypt(der, []byte(pass))
		if err != nil {
			return err
		}
		block = &pem.Block{Type: cosignKeyType, Bytes: enc}
	}
	pub, err := trust.MarshalPublicKey(priv.Public())
	if err != nil {
		return err
	}
	pubPath := strings.TrimSuffix(path, ".key") + ".pub"
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s exists: not overwriting a key", path)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(pubPath, pub, 0o644); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "wrote %s (private, %s) and %s (public, key %s)\n", path, alg, pubPath, trust.KeyID(priv.Public()))
	return err
}

// PEM types of cosign's encrypted private keys: the one it writes now, and
// the one older releases wrote.
const (
	cosignKeyType    = "ENCRYPTED SIGSTORE PRIVATE KEY"
	cosignOldKeyType = "ENCRYPTED COSIGN PRIVATE KEY"
)

// readPrivateKey reads a PEM private key: PKCS#8, SEC 1 (EC PRIVATE KEY)
// or cosign's encrypted format (password from $COSIGN_PASSWORD).
func readPrivateKey(path string) (crypto.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	var key any
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case cosignKeyType, cosignOldKeyType:
		pass, ok := os.LookupEnv("COSIGN_PASSWORD")
		if !ok {
			return nil, fmt.Errorf("%s: a cosign key, encrypted: set COSIGN_PASSWORD to its password", path)
		}
		der, derr := encrypted.Decrypt(block.Bytes, []byte(pass))
		if derr != nil {
			return nil, fmt.Errorf("%s: decrypting the cosign key (wrong COSIGN_PASSWORD?): %w", path, derr)
		}
		key, err = x509.ParsePKCS8PrivateKey(der)
	case "PUBLIC KEY":
		return nil, fmt.Errorf("%s: a public key; signing needs the private key", path)
	default:
		return nil, fmt.Errorf("%s: PEM block %q is not a private key this command reads (PRIVATE KEY, EC PRIVATE KEY, %s)", path, block.Type, cosignKeyType)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: a key of type %T cannot sign", path, key)
	}
	return s, nil
}

const verifyUsage = `Usage:
  wasmsched verify --key K.pub [--key K2.pub]... P.wasm [--signature FILE]
  wasmsched verify --key K.pub [--key K2.pub]... REGISTRY/REPO@sha256:... [--sha256 MODULE] [--registry-ca FILE]

Checks a module as the scheduler's trust policy would, before it loads
anything: P.wasm against the signatures in P.wasm.sig (or --signature), an
OCI artifact (pulled and checked against its digests, as the scheduler
pulls it) against its cosign signatures. Succeeds when a signature verifies
with one of the keys; otherwise says, for each signature, why not.

`

type keyFlags []string

func (k *keyFlags) String() string     { return strings.Join(*k, ",") }
func (k *keyFlags) Set(v string) error { *k = append(*k, v); return nil }

func runVerify(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, verifyUsage)
		fs.PrintDefaults()
	}
	var keys keyFlags
	fs.Var(&keys, "key", "a trusted public key (PEM); repeat for several")
	sigFile := fs.String("signature", "", "the detached signature of a module file (default: the file's .sig)")
	caFile := fs.String("registry-ca", "", "PEM file of CA certificates trusted besides the system roots")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(pos) != 1 || len(keys) == 0 {
		fs.Usage()
		return errUsage
	}
	p := &trust.Policy{Required: true}
	for _, k := range keys {
		b, err := os.ReadFile(k)
		if err != nil {
			return err
		}
		pub, err := trust.ParsePublicKey(b)
		if err != nil {
			return fmt.Errorf("--key %s: %w", k, err)
		}
		p.Keys = append(p.Keys, trust.Key{Name: k, Public: pub})
	}
	target := pos[0]
	var v source.Version
	if _, statErr := os.Stat(target); statErr == nil {
		module, err := os.ReadFile(target)
		if err != nil {
			return err
		}
		v = source.Version{Module: module, Digest: source.Digest(module), Origin: "file " + target}
		if *sigFile != "" {
			b, err := os.ReadFile(*sigFile)
			if err != nil {
				return err
			}
			if v.Signatures, err = source.ParseSignatures(string(b), "signature file "+*sigFile); err != nil {
				return err
			}
		} else if v.Signatures, err = source.ReadDetachedSignatures(target); err != nil {
			return err
		}
	} else {
		opts, err := ociOptions(*caFile, *timeout)
		if err != nil {
			return err
		}
		if _, err := source.ParseOCIReference(target); err != nil {
			return fmt.Errorf("%s is neither a file nor an OCI reference pinned by digest: %w", target, err)
		}
		v, _, err = source.PullOCI(context.Background(), target, opts)
		if err != nil {
			return err
		}
	}
	verdict, err := p.Check(v, nil)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "verified: module sha256:%s (%s) is signed by %s (%s)\n", v.Digest, v.Origin, verdict.Key.Name, trust.KeyID(verdict.Key.Public))
	return err
}
