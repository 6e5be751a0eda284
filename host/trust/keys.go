package trust

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
)

// ParsePublicKey reads one PEM public key (PKIX, block "PUBLIC KEY"):
// ECDSA on P-256 or Ed25519. Other algorithms and curves are refused,
// naming them.
func ParsePublicKey(b []byte) (crypto.PublicKey, error) {
	block, rest := pem.Decode(b)
	if block == nil {
		return nil, errors.New("no PEM block (a public key looks like -----BEGIN PUBLIC KEY-----)")
	}
	if block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("PEM block %q, not a PUBLIC KEY (is it the private key?)", block.Type)
	}
	if r, _ := pem.Decode(rest); r != nil {
		return nil, errors.New("more than one PEM block: give one key per entry")
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	if err := checkAlgorithm(pub); err != nil {
		return nil, err
	}
	return pub, nil
}

func checkAlgorithm(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return fmt.Errorf("an ECDSA key on %s: only P-256 is accepted", k.Curve.Params().Name)
		}
		return nil
	case ed25519.PublicKey:
		return nil
	default:
		return fmt.Errorf("a key of type %T: only ECDSA P-256 and Ed25519 are accepted", pub)
	}
}

// MarshalPublicKey writes pub as a PEM public key.
func MarshalPublicKey(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// KeyID is a short name for a public key in messages: "sha256:" and the
// first 12 hex digits of the sha256 of its PKIX encoding.
func KeyID(pub crypto.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "?"
	}
	s := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(s[:6])
}

// Sign signs message with key as cosign does: ECDSA P-256 as ASN.1 over
// the message's SHA-256, Ed25519 over the message itself.
func Sign(key crypto.Signer, message []byte) ([]byte, error) {
	if err := checkAlgorithm(key.Public()); err != nil {
		return nil, err
	}
	switch k := key.(type) {
	case ed25519.PrivateKey:
		return ed25519.Sign(k, message), nil
	default:
		h := sha256.Sum256(message)
		return key.Sign(rand.Reader, h[:], crypto.SHA256)
	}
}

// VerifySignature checks sig over message with pub.
func VerifySignature(pub crypto.PublicKey, message, sig []byte) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		h := sha256.Sum256(message)
		if !ecdsa.VerifyASN1(k, h[:], sig) {
			return errBadSignature
		}
		return nil
	case ed25519.PublicKey:
		if !ed25519.Verify(k, message, sig) {
			return errBadSignature
		}
		return nil
	default:
		return checkAlgorithm(pub)
	}
}

var errBadSignature = errors.New("the signature does not verify")
