package source

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wasmsched/wasmsched/host/source/cmformat"
)

// Signatures of OCI artifacts, stored as cosign stores them: an image at
// the tag sha256-<manifest hex>.sig in the artifact's repository, one
// layer per signature, each layer a simple-signing payload (media type
// SimpleSigningMediaType) annotated with the base64 signature over it
// (SignatureAnnotationKey). host/trust owns the payload; this file only
// moves it.

// Media type and annotation of a cosign signature layer.
const (
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	SignatureAnnotationKey = "dev.cosignproject.cosign/signature"
)

// Bounds of a signature image read from a registry: cosign's hold one
// layer per signature, a few hundred bytes each.
const (
	maxSignatureLayers  = 32
	maxSignaturePayload = 64 << 10
)

// OCISignatureTag is where cosign keeps the signatures of the artifact d:
// REPO:sha256-<hex>.sig.
func OCISignatureTag(d name.Digest) name.Tag {
	return d.Context().Tag(strings.Replace(d.DigestStr(), ":", "-", 1) + ".sig")
}

// PushOCISignature adds a signature (payload, and the raw signature over
// it) to the signature image of d, keeping the signatures already there
// (two keys during a rotation), as cosign does.
func PushOCISignature(ctx context.Context, d name.Digest, payload, sig []byte, opts OCIOptions) error {
	ctx, cancel := opts.context(ctx)
	defer cancel()
	tag := OCISignatureTag(d)
	b64 := base64.StdEncoding.EncodeToString(sig)
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	if old, err := remote.Image(tag, opts.remote(ctx)...); err == nil {
		img = old
		m, err := old.Manifest()
		if err != nil {
			return &OCIError{Ref: tag.String(), Err: err}
		}
		for _, l := range m.Layers {
			if l.Annotations[SignatureAnnotationKey] == b64 {
				return nil // this very signature is there
			}
		}
	} else if !isNotFound(err) {
		return &OCIError{Ref: tag.String(), Err: err}
	}
	img, err := mutate.Append(img, mutate.Addendum{
		Layer:       static.NewLayer(payload, SimpleSigningMediaType),
		Annotations: map[string]string{SignatureAnnotationKey: b64},
	})
	if err != nil {
		return err
	}
	if err := remote.Write(tag, img, opts.remote(ctx)...); err != nil {
		return &OCIError{Ref: tag.String(), Err: err}
	}
	return nil
}

// FetchOCISignatures reads the signatures of the artifact d; none when its
// signature tag does not exist. A signature image that is not what cosign
// writes (too many layers, a layer of another media type or too large, a
// missing or undecodable annotation) is an error naming it.
func FetchOCISignatures(ctx context.Context, d name.Digest, opts OCIOptions) ([]Signature, error) {
	ctx, cancel := opts.context(ctx)
	defer cancel()
	tag := OCISignatureTag(d)
	sigs, err := fetchOCISignatures(ctx, tag, opts)
	if err != nil {
		return nil, &OCIError{Ref: tag.String(), Err: err}
	}
	return sigs, nil
}

func fetchOCISignatures(ctx context.Context, tag name.Tag, opts OCIOptions) ([]Signature, error) {
	desc, err := remote.Get(tag, opts.remote(ctx)...)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("signature manifest: %w", err)
	}
	if len(desc.Manifest) > maxOCIManifest {
		return nil, fmt.Errorf("signature manifest of %d bytes is over the limit of %d", len(desc.Manifest), maxOCIManifest)
	}
	m, err := ggcrv1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		return nil, fmt.Errorf("signature manifest: %w", err)
	}
	if n := len(m.Layers); n > maxSignatureLayers {
		return nil, fmt.Errorf("signature manifest has %d layers, over the limit of %d", n, maxSignatureLayers)
	}
	var sigs []Signature
	for i, l := range m.Layers {
		switch {
		case l.MediaType != SimpleSigningMediaType:
			return nil, fmt.Errorf("signature layer %d of media type %q, not %s", i, l.MediaType, SimpleSigningMediaType)
		case l.Size <= 0 || l.Size > maxSignaturePayload:
			return nil, fmt.Errorf("signature layer %d of %d bytes: must be 1 to %d", i, l.Size, maxSignaturePayload)
		}
		sig, err := base64.StdEncoding.DecodeString(l.Annotations[SignatureAnnotationKey])
		if err != nil || len(sig) == 0 {
			return nil, fmt.Errorf("signature layer %d: annotation %s is missing or not base64", i, SignatureAnnotationKey)
		}
		rl, err := remote.Layer(tag.Context().Digest(l.Digest.String()), opts.remote(ctx)...)
		if err != nil {
			return nil, fmt.Errorf("signature layer %d: %w", i, err)
		}
		rc, err := rl.Compressed()
		if err != nil {
			return nil, fmt.Errorf("signature layer %d: %w", i, err)
		}
		payload, err := io.ReadAll(io.LimitReader(rc, l.Size+1))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("signature layer %d: %w", i, err)
		}
		if int64(len(payload)) != l.Size {
			return nil, fmt.Errorf("signature layer %d: the registry sent %d bytes, its descriptor says %d", i, len(payload), l.Size)
		}
		if h, _, _ := ggcrv1.SHA256(bytes.NewReader(payload)); h != l.Digest {
			return nil, fmt.Errorf("signature layer %d: the registry sent bytes of %s, not %s", i, h, l.Digest)
		}
		sigs = append(sigs, Signature{Payload: payload, Signature: sig, From: fmt.Sprintf("%s layer %d", tag, i)})
	}
	return sigs, nil
}

func isNotFound(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound
}

// sigSuffix names the file beside a cached module that holds the
// signatures found with it.
const sigSuffix = ".sigs.json"

type cachedSignatures struct {
	Manifest   string            `json:"manifest,omitempty"`
	Signatures []cachedSignature `json:"signatures"`
}

type cachedSignature struct {
	Payload   []byte `json:"payload,omitempty"`
	Signature []byte `json:"signature"`
	From      string `json:"from"`
}

// PutSignatures keeps, beside the cached module digest, the signatures
// found with it (and the manifest they vouch for), so that a restart with
// the registry down can check them. They are checked by host/trust when
// read back, like any others: the file vouches for nothing by itself.
func (c *Cache) PutSignatures(digest, manifest string, sigs []Signature) error {
	if !cmformat.IsDigest(digest) {
		return fmt.Errorf("module cache: %q is not a sha256 digest", digest)
	}
	cs := cachedSignatures{Manifest: manifest, Signatures: []cachedSignature{}}
	for _, s := range sigs {
		cs.Signatures = append(cs.Signatures, cachedSignature{Payload: s.Payload, Signature: s.Signature, From: s.From})
	}
	b, err := json.Marshal(cs)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(c.dir, ".put-*")
	if err != nil {
		return fmt.Errorf("module cache: %w", err)
	}
	_, werr := tmp.Write(b)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("module cache: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(c.dir, digest+sigSuffix)); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("module cache: %w", err)
	}
	return nil
}

// Signatures reads what PutSignatures kept for the module digest: the
// manifest and the signatures (none, without error, when nothing was
// kept).
func (c *Cache) Signatures(digest string) (string, []Signature, error) {
	if !cmformat.IsDigest(digest) {
		return "", nil, fmt.Errorf("module cache: %q is not a sha256 digest", digest)
	}
	p := filepath.Join(c.dir, digest+sigSuffix)
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("module cache: %w", err)
	}
	defer f.Close()
	var cs cachedSignatures
	if err := json.NewDecoder(io.LimitReader(f, maxSignatureLayers*2*maxSignaturePayload)).Decode(&cs); err != nil {
		return "", nil, fmt.Errorf("module cache: %s: %w", p, err)
	}
	var sigs []Signature
	for _, s := range cs.Signatures {
		sigs = append(sigs, Signature{Payload: s.Payload, Signature: s.Signature, From: s.From + " (kept in the module cache)"})
	}
	return cs.Manifest, sigs, nil
}
