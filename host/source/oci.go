package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Modules in OCI registries.
//
// A module is published as an OCI artifact (docs/policy-oci.md): an image
// manifest whose artifactType is OCIArtifactType, whose config is the OCI
// empty descriptor and whose single layer, of media type OCILayerType, is
// the module's bytes uncompressed, so that the layer's digest is the
// module's sha256. A policy names it by manifest digest
// (oci://REGISTRY/REPO@sha256:...) and by module sha256: the manifest is
// checked against the first by the registry client, the layer against the
// second here, before a byte of it is kept.

// Media types of a policy module artifact.
const (
	OCIArtifactType = "application/vnd.wasmsched.policy.v1"
	OCILayerType    = "application/vnd.wasmsched.policy.module.v1.wasm"
	ociEmptyConfig  = "application/vnd.oci.empty.v1+json"
)

// Annotations of a policy module artifact's manifest.
const (
	OCIAnnotationSHA256 = "io.wasmsched.module.sha256"
	OCIAnnotationABI    = "io.wasmsched.abi.version"
	OCIAnnotationSDK    = "io.wasmsched.sdk.version"
	OCIAnnotationSchema = "io.wasmsched.settings.schema"
	OCIAnnotationTitle  = "org.opencontainers.image.title"
)

// OCIScheme prefixes a module reference in a SchedulingPolicy or in the
// plugin's arguments.
const OCIScheme = "oci://"

// maxOCIManifest bounds a manifest's bytes: a policy artifact's manifest
// is well under 4 KiB.
const maxOCIManifest = 64 << 10

// ociTimeout bounds one pull when the caller's context does not.
const ociTimeout = 2 * time.Minute

// OCIOptions are how a registry is reached.
type OCIOptions struct {
	// Transport carries the requests (nil: http.DefaultTransport, the
	// system roots). Tests and CA bundles put their roots here.
	Transport http.RoundTripper
	// Keychain gives credentials per registry (nil: anonymous).
	Keychain authn.Keychain
	// Timeout bounds a pull or push (0: two minutes).
	Timeout time.Duration
}

func (o OCIOptions) remote(ctx context.Context) []remote.Option {
	t := o.Transport
	if t == nil {
		t = http.DefaultTransport
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(limitTransport{t, MaxModuleSize + maxOCIManifest}), remote.WithRetryStatusCodes()}
	if o.Keychain != nil {
		opts = append(opts, remote.WithAuthFromKeychain(o.Keychain))
	}
	return opts
}

func (o OCIOptions) context(ctx context.Context) (context.Context, context.CancelFunc) {
	d := o.Timeout
	if d <= 0 {
		d = ociTimeout
	}
	return context.WithTimeout(ctx, d)
}

// ParseOCIReference reads "oci://REGISTRY/REPO@sha256:<64 hex>" (the
// scheme may be left out). A tag is refused: a policy is pinned by
// manifest digest. Registries on loopback hosts are spoken to over plain
// HTTP when they do not speak TLS (go-containerregistry's rule); every
// other registry over HTTPS.
func ParseOCIReference(ref string) (name.Digest, error) {
	s := strings.TrimPrefix(ref, OCIScheme)
	if s == "" {
		return name.Digest{}, fmt.Errorf("oci reference %q: empty", ref)
	}
	if !strings.Contains(s, "@") {
		return name.Digest{}, fmt.Errorf("oci reference %q: not pinned: name the manifest by digest (REGISTRY/REPO@sha256:...; wasmsched push --oci prints it), or opt in to a tag with allowTag (docs/policy-oci.md)", ref)
	}
	d, err := name.NewDigest(s, name.StrictValidation)
	if err != nil {
		return name.Digest{}, fmt.Errorf("oci reference %q: %w", ref, err)
	}
	if !strings.HasPrefix(d.DigestStr(), "sha256:") {
		return name.Digest{}, fmt.Errorf("oci reference %q: the manifest digest must be sha256", ref)
	}
	return d, nil
}

// IsOCITag reports whether ref names a tag (oci://REGISTRY/REPO:TAG, or
// a repository alone, which is its tag "latest") rather than a manifest
// digest.
func IsOCITag(ref string) bool {
	s := strings.TrimPrefix(ref, OCIScheme)
	return s != "" && !strings.Contains(s, "@")
}

// ParseOCITagReference reads "oci://REGISTRY/REPO:TAG" (the scheme may be
// left out), a reference a policy names only with its explicit opt-in
// (allowTag). The tag must be written out: a repository alone (the
// implicit "latest") is refused.
func ParseOCITagReference(ref string) (name.Tag, error) {
	s := strings.TrimPrefix(ref, OCIScheme)
	if s == "" {
		return name.Tag{}, fmt.Errorf("oci reference %q: empty", ref)
	}
	if strings.Contains(s, "@") {
		return name.Tag{}, fmt.Errorf("oci reference %q: names a digest, not a tag", ref)
	}
	if i := strings.LastIndex(s, ":"); i < 0 || strings.Contains(s[i:], "/") {
		return name.Tag{}, fmt.Errorf("oci reference %q: no tag: write the tag out (REGISTRY/REPO:TAG), there is no implicit latest", ref)
	}
	t, err := name.NewTag(s, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("oci reference %q: %w", ref, err)
	}
	return t, nil
}

// OCIResolution is what a tag named when it was resolved: the pinned
// manifest and the module its one layer holds.
type OCIResolution struct {
	Tag    name.Tag
	Pinned name.Digest
	// SHA256 is the module's sha256 (the layer's digest).
	SHA256 string
}

// ResolveOCITag reads the manifest tag names now and returns it pinned by
// digest, with the module it holds, after the checks a pull makes of a
// manifest (a policy artifact, one layer of the module's media type,
// within the size limits). When sha256 is not empty the layer must be that
// module: a tag that names another module is refused, naming both. The
// module's bytes are not read: FetchOCI pulls the pinned reference.
func ResolveOCITag(ctx context.Context, ref, sha256 string, opts OCIOptions) (OCIResolution, error) {
	t, err := ParseOCITagReference(ref)
	if err != nil {
		return OCIResolution{}, err
	}
	if sha256 != "" {
		if reason := digestProblem(sha256); reason != "" {
			return OCIResolution{}, &OCIError{Ref: ref, Err: fmt.Errorf("sha256 %q: %s", sha256, reason)}
		}
		sha256 = strings.ToLower(sha256)
	}
	ctx, cancel := opts.context(ctx)
	defer cancel()
	desc, err := remote.Get(t, opts.remote(ctx)...)
	if err != nil {
		return OCIResolution{}, &OCIError{Ref: t.String(), Err: fmt.Errorf("resolving the tag: %w", err)}
	}
	pinned := t.Context().Digest(desc.Digest.String())
	if desc.Digest.Algorithm != "sha256" {
		return OCIResolution{}, &OCIError{Ref: t.String(), Err: fmt.Errorf("the tag names manifest %s: the manifest digest must be sha256", desc.Digest)}
	}
	if len(desc.Manifest) > maxOCIManifest {
		return OCIResolution{}, &OCIError{Ref: pinned.String(), Err: fmt.Errorf("manifest of %d bytes is over the limit of %d", len(desc.Manifest), maxOCIManifest)}
	}
	want := sha256
	if want == "" {
		m, err := ggcrv1.ParseManifest(bytes.NewReader(desc.Manifest))
		if err != nil {
			return OCIResolution{}, &OCIError{Ref: pinned.String(), Err: fmt.Errorf("manifest: %w", err)}
		}
		if len(m.Layers) == 1 && m.Layers[0].Digest.Algorithm == "sha256" {
			want = m.Layers[0].Digest.Hex
		}
	}
	layer, err := checkOCIManifest(desc.MediaType, desc.Manifest, want)
	if err != nil {
		if sha256 != "" && layer.Digest.Hex != "" && layer.Digest.Hex != sha256 {
			err = fmt.Errorf("the tag names manifest %s, whose module is %s, not the module sha256:%s the policy names", desc.Digest, layer.Digest, sha256)
		}
		return OCIResolution{}, &OCIError{Ref: t.String(), Err: err}
	}
	return OCIResolution{Tag: t, Pinned: pinned, SHA256: layer.Digest.Hex}, nil
}

// ParseOCIPushReference reads a reference to push to or pull from: a tag
// or a digest, the scheme optional.
func ParseOCIPushReference(ref string) (name.Reference, error) {
	s := strings.TrimPrefix(ref, OCIScheme)
	r, err := name.ParseReference(s, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("oci reference %q: %w", ref, err)
	}
	return r, nil
}

// OCIError is a failed pull: the reference and what went wrong.
type OCIError struct {
	Ref string
	Err error
}

func (e *OCIError) Error() string { return "oci " + e.Ref + ": " + e.Err.Error() }
func (e *OCIError) Unwrap() error { return e.Err }

// FetchOCI pulls the module of the artifact ref (pinned by manifest
// digest) and checks that it is the module sha256. It refuses, naming
// what is wrong: a manifest of another kind or media type, more than one
// layer, a layer of another media type, a layer larger than MaxModuleSize
// or whose descriptor names another digest than sha256, bytes that are
// not what the descriptor says, a body longer than the limit (an endless
// stream), and whatever the registry answers instead of the artifact.
// The pull is bounded by opts.Timeout and ctx. The artifact's cosign
// signatures come with the module (Version.Signatures; none when it has
// no signature tag), unchecked: host/trust checks them.
func FetchOCI(ctx context.Context, ref, sha256 string, opts OCIOptions) (Version, error) {
	d, err := ParseOCIReference(ref)
	if err != nil {
		return Version{}, err
	}
	if reason := digestProblem(sha256); reason != "" {
		return Version{}, &OCIError{Ref: ref, Err: fmt.Errorf("sha256 %q: %s", sha256, reason)}
	}
	sha256 = strings.ToLower(sha256)
	ctx, cancel := opts.context(ctx)
	defer cancel()
	module, err := pullOCI(ctx, d, sha256, opts)
	if err != nil {
		return Version{}, &OCIError{Ref: d.String(), Err: err}
	}
	tag := OCISignatureTag(d)
	sigs, err := fetchOCISignatures(ctx, tag, opts)
	if err != nil {
		return Version{}, &OCIError{Ref: tag.String(), Err: err}
	}
	return Version{Module: module, Digest: sha256, Origin: "oci " + d.String(), Manifest: d.DigestStr(), Signatures: sigs}, nil
}

func pullOCI(ctx context.Context, d name.Digest, sha256 string, opts OCIOptions) ([]byte, error) {
	desc, err := remote.Get(d, opts.remote(ctx)...)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if len(desc.Manifest) > maxOCIManifest {
		return nil, fmt.Errorf("manifest of %d bytes is over the limit of %d", len(desc.Manifest), maxOCIManifest)
	}
	layer, err := checkOCIManifest(desc.MediaType, desc.Manifest, sha256)
	if err != nil {
		return nil, err
	}
	rl, err := remote.Layer(d.Context().Digest(layer.Digest.String()), opts.remote(ctx)...)
	if err != nil {
		return nil, fmt.Errorf("layer %s: %w", layer.Digest, err)
	}
	rc, err := rl.Compressed()
	if err != nil {
		return nil, fmt.Errorf("layer %s: %w", layer.Digest, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, layer.Size+1))
	switch {
	case int64(len(b)) > layer.Size:
		return nil, fmt.Errorf("layer %s: the registry sent more than the %d bytes its descriptor says", layer.Digest, layer.Size)
	case err != nil:
		return nil, fmt.Errorf("layer %s: %w", layer.Digest, err)
	case int64(len(b)) != layer.Size:
		return nil, fmt.Errorf("layer %s: the registry sent %d bytes, its descriptor says %d", layer.Digest, len(b), layer.Size)
	}
	if got := Digest(b); got != sha256 {
		return nil, fmt.Errorf("layer %s: the registry sent bytes of sha256 %s, not the module %s", layer.Digest, got, sha256)
	}
	return b, nil
}

// checkOCIManifest checks that a manifest is a policy artifact holding the
// module sha256, and returns its layer.
func checkOCIManifest(mt types.MediaType, raw []byte, sha256 string) (ggcrv1.Descriptor, error) {
	if mt != types.OCIManifestSchema1 && mt != types.DockerManifestSchema2 {
		return ggcrv1.Descriptor{}, fmt.Errorf("manifest of media type %q is not an image manifest (an index or another kind of artifact?)", mt)
	}
	m, err := ggcrv1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return ggcrv1.Descriptor{}, fmt.Errorf("manifest: %w", err)
	}
	artifact := string(m.Config.MediaType)
	if at := manifestArtifactType(raw); at != "" {
		artifact = at
	}
	if artifact != OCIArtifactType {
		return ggcrv1.Descriptor{}, fmt.Errorf("manifest is an artifact of type %q, not a wasmsched policy (%s)", artifact, OCIArtifactType)
	}
	if n := len(m.Layers); n != 1 {
		return ggcrv1.Descriptor{}, fmt.Errorf("manifest has %d layers; a policy artifact has exactly one", n)
	}
	l := m.Layers[0]
	switch {
	case l.MediaType != OCILayerType:
		return l, fmt.Errorf("layer of media type %q, not %s", l.MediaType, OCILayerType)
	case l.Size <= 0:
		return l, fmt.Errorf("layer %s of size %d: empty", l.Digest, l.Size)
	case l.Size > MaxModuleSize:
		return l, fmt.Errorf("layer %s of %d bytes is over the module limit of %d", l.Digest, l.Size, MaxModuleSize)
	case l.Digest.Algorithm != "sha256" || l.Digest.Hex != sha256:
		return l, fmt.Errorf("the manifest's layer is %s, not the module sha256:%s the policy names", l.Digest, sha256)
	}
	return l, nil
}

// manifestArtifactType is an OCI 1.1 manifest's artifactType ("" when
// absent).
func manifestArtifactType(raw []byte) string {
	var m struct {
		ArtifactType string `json:"artifactType"`
	}
	_ = json.Unmarshal(raw, &m)
	return m.ArtifactType
}

// PushOCI publishes module at ref (a tag or a repository) as a policy
// artifact with the annotations given (besides the module's sha256 and
// title, set here) and returns the pinned reference,
// REGISTRY/REPO@sha256:<manifest digest>.
func PushOCI(ctx context.Context, ref string, module []byte, annotations map[string]string, opts OCIOptions) (name.Digest, error) {
	r, err := ParseOCIPushReference(ref)
	if err != nil {
		return name.Digest{}, err
	}
	if len(module) == 0 || len(module) > MaxModuleSize {
		return name.Digest{}, fmt.Errorf("module of %d bytes: must be 1 to %d bytes", len(module), MaxModuleSize)
	}
	ctx, cancel := opts.context(ctx)
	defer cancel()
	sum := Digest(module)
	anns := map[string]string{OCIAnnotationSHA256: sum, OCIAnnotationTitle: "module.wasm"}
	for k, v := range annotations {
		if v != "" {
			anns[k] = v
		}
	}
	layer := static.NewLayer(module, OCILayerType)
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer, Annotations: map[string]string{OCIAnnotationTitle: "module.wasm"}})
	if err != nil {
		return name.Digest{}, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, ociEmptyConfig)
	img = mutate.Annotations(img, anns).(ggcrv1.Image)
	img = &artifactImage{Image: img}
	if err := remote.Write(r, img, opts.remote(ctx)...); err != nil {
		return name.Digest{}, &OCIError{Ref: r.String(), Err: err}
	}
	dig, err := img.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return r.Context().Digest(dig.String()), nil
}

// PullOCI reads the module of the artifact at ref (a tag or a digest),
// checked against the layer's own digest, and returns it with the
// manifest's digest.
func PullOCI(ctx context.Context, ref string, opts OCIOptions) (Version, name.Digest, error) {
	r, err := ParseOCIPushReference(ref)
	if err != nil {
		return Version{}, name.Digest{}, err
	}
	ctx, cancel := opts.context(ctx)
	defer cancel()
	desc, err := remote.Get(r, opts.remote(ctx)...)
	if err != nil {
		return Version{}, name.Digest{}, &OCIError{Ref: r.String(), Err: err}
	}
	pinned := r.Context().Digest(desc.Digest.String())
	m, err := ggcrv1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil || len(m.Layers) != 1 {
		if err == nil {
			err = fmt.Errorf("manifest has %d layers; a policy artifact has exactly one", len(m.Layers))
		}
		return Version{}, pinned, &OCIError{Ref: pinned.String(), Err: err}
	}
	v, err := FetchOCI(ctx, pinned.String(), m.Layers[0].Digest.Hex, opts)
	return v, pinned, err
}

// artifactImage is an image whose manifest carries the OCI 1.1
// artifactType, which go-containerregistry's mutate does not set.
type artifactImage struct {
	ggcrv1.Image
}

func (a *artifactImage) RawManifest() ([]byte, error) {
	raw, err := a.Image.RawManifest()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	m["artifactType"] = OCIArtifactType
	// The OCI empty config: "{}" (go-containerregistry writes its own
	// config file; the descriptor must name the blob it uploads).
	return json.Marshal(m)
}

func (a *artifactImage) Digest() (ggcrv1.Hash, error) {
	raw, err := a.RawManifest()
	if err != nil {
		return ggcrv1.Hash{}, err
	}
	h, _, err := ggcrv1.SHA256(bytes.NewReader(raw))
	return h, err
}

func (a *artifactImage) Manifest() (*ggcrv1.Manifest, error) {
	raw, err := a.RawManifest()
	if err != nil {
		return nil, err
	}
	return ggcrv1.ParseManifest(bytes.NewReader(raw))
}

func (a *artifactImage) Size() (int64, error) {
	raw, err := a.RawManifest()
	return int64(len(raw)), err
}

// limitTransport fails a response body that runs past max bytes: a
// registry that streams without end is cut off there.
type limitTransport struct {
	rt  http.RoundTripper
	max int64
}

func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if resp.ContentLength > t.max {
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: the registry announces %d bytes, over the limit of %d", req.Method, req.URL.Redacted(), resp.ContentLength, t.max)
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.max, url: req.URL.Redacted()}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
	url  string
}

var errOCITooLong = errors.New("response body over the limit")

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("%s: %w (an endless stream?)", b.url, errOCITooLong)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, fmt.Errorf("%s: %w (an endless stream?)", b.url, errOCITooLong)
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// DockerConfigKeychain reads a kubernetes.io/dockerconfigjson Secret's
// .dockerconfigjson ({"auths": {"REGISTRY": {"username", "password"} or
// {"auth": base64 "user:password"}}}) as credentials for the registries it
// names; other registries are anonymous.
func DockerConfigKeychain(b []byte) (authn.Keychain, error) {
	var cfg struct {
		Auths map[string]authn.AuthConfig `json:"auths"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf(".dockerconfigjson: %w", err)
	}
	if len(cfg.Auths) == 0 {
		return nil, errors.New(".dockerconfigjson: no registry in auths")
	}
	k := dockerKeychain{}
	for host, a := range cfg.Auths {
		host = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(host, "https://"), "http://"), "/")
		host = strings.TrimSuffix(host, "/v1")
		k[host] = a
	}
	return k, nil
}

type dockerKeychain map[string]authn.AuthConfig

func (k dockerKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if a, ok := k[r.RegistryStr()]; ok {
		return authn.FromConfig(a), nil
	}
	return authn.Anonymous, nil
}
