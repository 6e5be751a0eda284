package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// servingCertFlags writes a fresh self-signed serving certificate for
// 127.0.0.1 and localhost into dir and returns the kube-apiserver flags that
// use it.
//
// Without them the test helper would use a key pair from the Kubernetes
// source tree (testdata/, whose private key is public) or, when the binary
// runs where that tree is absent, try to write a new pair into it and fail.
// An ECDSA key costs about a millisecond.
func servingCertFlags(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "wasmsched-controlplane"},
		NotBefore:             now.Add(-time.Hour), // tolerate clock skew
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	certFile := filepath.Join(dir, "apiserver.crt")
	keyFile := filepath.Join(dir, "apiserver.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	// --cert-dir too: from 1.36 the test server, with the
	// UnknownVersionInteroperabilityProxy gate (beta, on), reads its peer
	// CA from <cert-dir>/apiserver.crt, which it writes only when it makes
	// its own serving certificate.
	return []string{
		fmt.Sprintf("--tls-cert-file=%s", certFile),
		fmt.Sprintf("--tls-private-key-file=%s", keyFile),
		fmt.Sprintf("--cert-dir=%s", dir),
	}, nil
}
