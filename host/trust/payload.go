package trust

import (
	"encoding/json"
	"fmt"
)

// SimpleSigningType is the type of cosign's image signature payload.
const SimpleSigningType = "cosign container image signature"

// maxPayload bounds a payload read from a registry: cosign's are a few
// hundred bytes.
const maxPayload = 64 << 10

// SimpleSigningPayload is the payload cosign signs for an image: the
// repository (docker-reference) and the manifest digest
// ("sha256:<hex>"), the digest being what the signature vouches for.
func SimpleSigningPayload(repository, manifestDigest string) []byte {
	p := simpleSigning{Optional: nil}
	p.Critical.Identity.DockerReference = repository
	p.Critical.Image.DockerManifestDigest = manifestDigest
	p.Critical.Type = SimpleSigningType
	b, _ := json.Marshal(p)
	return b
}

type simpleSigning struct {
	Critical struct {
		Identity struct {
			DockerReference string `json:"docker-reference"`
		} `json:"identity"`
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
	Optional map[string]any `json:"optional"`
}

// payloadDigest reads a simple-signing payload's manifest digest.
func payloadDigest(b []byte) (string, error) {
	if len(b) > maxPayload {
		return "", fmt.Errorf("payload of %d bytes is over the limit of %d", len(b), maxPayload)
	}
	var p simpleSigning
	if err := json.Unmarshal(b, &p); err != nil {
		return "", fmt.Errorf("payload is not a simple-signing document: %w", err)
	}
	if p.Critical.Type != SimpleSigningType {
		return "", fmt.Errorf("payload of type %q, not %q", p.Critical.Type, SimpleSigningType)
	}
	if p.Critical.Image.DockerManifestDigest == "" {
		return "", fmt.Errorf("payload names no manifest digest")
	}
	return p.Critical.Image.DockerManifestDigest, nil
}
