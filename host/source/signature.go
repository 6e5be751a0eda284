package source

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Signatures beside modules that are not in a registry, as cosign
// sign-blob makes them: the base64 signature over the module's bytes.
//
//   - a file or URL module: a detached signature file beside it, the
//     module's path or address with ".sig" appended (cosign sign-blob
//     --output-signature), one signature per line;
//   - ConfigMap chunks: the annotation AnnotationSignature on chunk 0,
//     signatures separated by commas (two during a key rotation).
//
// They are read with the module and handed over unchecked
// (Version.Signatures); host/trust checks them.

// AnnotationSignature holds a chunked module's signatures.
const AnnotationSignature = "wasmsched.io/signature"

// SignatureSuffix is appended to a module's path or address to name its
// detached signature.
const SignatureSuffix = ".sig"

// maxDetached bounds a detached signature file: a signature is under 100
// bytes of base64.
const maxDetached = 64 << 10

// ParseSignatures reads base64 signatures separated by commas, spaces or
// newlines, as cosign writes them.
func ParseSignatures(s, from string) ([]Signature, error) {
	var sigs []Signature
	for i, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' || r == ' ' || r == '\t' }) {
		b, err := base64.StdEncoding.DecodeString(f)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("%s: signature %d is not base64", from, i)
		}
		sigs = append(sigs, Signature{Signature: b, From: from})
	}
	return sigs, nil
}

// ReadDetachedSignatures reads the signatures in path+".sig"; none when
// that file does not exist.
func ReadDetachedSignatures(path string) ([]Signature, error) {
	p := path + SignatureSuffix
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("signature %s: %w", p, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDetached+1))
	if err != nil {
		return nil, fmt.Errorf("signature %s: %w", p, err)
	}
	if len(b) > maxDetached {
		return nil, fmt.Errorf("signature %s: over %d bytes", p, maxDetached)
	}
	return ParseSignatures(string(b), "signature file "+p)
}

// chunkSignatures reads chunk 0's signatures. One that does not decode is
// kept as an empty signature, so that the trust check names it.
func chunkSignatures(namespace string, cm0 *v1.ConfigMap) []Signature {
	s, ok := cm0.Annotations[AnnotationSignature]
	if !ok {
		return nil
	}
	from := "annotation " + AnnotationSignature + " of configmap " + namespace + "/" + cm0.Name
	sigs, err := ParseSignatures(s, from)
	if err != nil {
		return []Signature{{From: from + " (" + err.Error() + ")"}}
	}
	return sigs
}
