// Package image builds the scheduler's OCI image without a container
// daemon (make image): a kube-scheduler built with CGO off, CA
// certificates, a non-root user (65532), a writable compilation cache
// directory, OCI labels; one index per Kubernetes minor holding each
// architecture, all written to one OCI image layout and an oci-archive
// tarball (docker load, podman load and skopeo copy read it).
//
// A build is reproducible: every timestamp is Options.Created
// (SOURCE_DATE_EPOCH), files are written in a fixed order with fixed
// owners, so two builds of one commit give the same digests.
//
// It never runs what it packs and never talks to a registry.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Paths inside the image.
const (
	// Entrypoint is the scheduler binary.
	Entrypoint = "/usr/local/bin/kube-scheduler"
	// CACertificates is the CA bundle (SSL_CERT_FILE).
	CACertificates = "/etc/ssl/certs/ca-certificates.crt"
	// CacheDir is the compilation cache, writable by User
	// (WASMSCHED_CACHE_DIR; the chart mounts an emptyDir there).
	CacheDir = "/var/cache/wasmsched"
	// PoliciesDir holds the example policies in the -examples variant.
	PoliciesDir = "/etc/wasmsched/policies"
	// UID and GID the scheduler runs as (distroless' nonroot).
	UID = 65532
	// User is the image config's user.
	User = "65532:65532"
)

// LabelMinor is the label naming the Kubernetes minor the image is built for.
const LabelMinor = "io.wasmsched.kubernetes.minor"

// Image describes one image: one architecture of one minor.
type Image struct {
	// Arch is the GOARCH (amd64, arm64); the OS is linux.
	Arch string
	// Binary is the path of its kube-scheduler, built with CGO off for Arch.
	Binary string
}

// Options describe an index: the images of one minor.
type Options struct {
	// Version is wasmsched's (v0.1.0), Minor the Kubernetes minor (1.37).
	Version, Minor string
	// Source and Revision label the image (org.opencontainers.image.source
	// and .revision).
	Source, Revision string
	// Created is every timestamp of the image (SOURCE_DATE_EPOCH).
	Created time.Time
	// CABundle is the CA certificates file to copy in.
	CABundle string
	// Images are the architectures.
	Images []Image
	// Policies, when set, are .wasm files (name to bytes) put under
	// PoliciesDir: the -examples variant.
	Policies map[string][]byte
}

// Tag is the index's tag: v0.1.0-k8s1.37, with -examples for the variant.
func (o Options) Tag() string {
	t := o.Version + "-k8s" + o.Minor
	if len(o.Policies) > 0 {
		t += "-examples"
	}
	return t
}

// Labels are the image config's labels.
func (o Options) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "wasmsched kube-scheduler",
		"org.opencontainers.image.description": "kube-scheduler with the WasmPolicy plugin: scheduling policies as WebAssembly modules",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     o.Created.UTC().Format(time.RFC3339),
		LabelMinor:                             o.Minor,
	}
}

// Index builds the minor's index: one image per architecture, in the
// order of o.Images.
func Index(o Options) (v1.ImageIndex, error) {
	if len(o.Images) == 0 {
		return nil, fmt.Errorf("image %s: no architecture to build", o.Tag())
	}
	ca, err := os.ReadFile(o.CABundle)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, im := range o.Images {
		img, err := build(o, im, ca)
		if err != nil {
			return nil, fmt.Errorf("image %s for linux/%s: %w", o.Tag(), im.Arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: im.Arch}},
		})
	}
	return idx, nil
}

// file is one entry of the image's only layer.
type file struct {
	mode     int64
	uid      int
	data     []byte
	dir      bool
	typeflag byte
}

func build(o Options, im Image, ca []byte) (v1.Image, error) {
	bin, err := os.ReadFile(im.Binary)
	if err != nil {
		return nil, err
	}
	files := map[string]file{
		"etc/passwd":        {mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		"etc/group":         {mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		"etc/nsswitch.conf": {mode: 0o644, data: []byte("hosts: files dns\n")},
		CACertificates[1:]:  {mode: 0o644, data: ca},
		Entrypoint[1:]:      {mode: 0o755, data: bin},
		CacheDir[1:]:        {mode: 0o755, uid: UID, dir: true},
		"tmp":               {mode: 0o1777, dir: true},
		"home/nonroot":      {mode: 0o700, uid: UID, dir: true},
	}
	for name, wasm := range o.Policies {
		files[path.Join(PoliciesDir[1:], name)] = file{mode: 0o644, data: wasm}
	}
	layer, err := layerOf(files, o.Created)
	if err != nil {
		return nil, err
	}
	cfg := &v1.ConfigFile{
		Architecture: im.Arch,
		OS:           "linux",
		Created:      v1.Time{Time: o.Created},
		Config: v1.Config{
			Entrypoint: []string{Entrypoint},
			User:       User,
			WorkingDir: "/",
			Env: []string{
				"PATH=/usr/local/bin",
				"SSL_CERT_FILE=" + CACertificates,
				"WASMSCHED_CACHE_DIR=" + CacheDir,
			},
			Labels: o.Labels(),
		},
	}
	img, err := mutate.ConfigFile(mutate.MediaType(empty.Image, types.OCIManifestSchema1), cfg)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: o.Created},
			CreatedBy: "wasmsched make image (internal/image)",
			Comment:   "kube-scheduler " + o.Minor + " with WasmPolicy, CA certificates, user 65532",
		},
		MediaType: types.OCILayer,
	})
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: o.Created})
}

// layerOf writes files, and every directory above them, into a tar in
// path order, owned by root unless said otherwise, every time created.
func layerOf(files map[string]file, created time.Time) (v1.Layer, error) {
	all := map[string]file{}
	for name, f := range files {
		all[name] = f
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if _, ok := all[d]; !ok {
				all[d] = file{mode: 0o755, dir: true}
			}
		}
	}
	// a file listed as a directory's parent keeps its own entry
	for name, f := range files {
		all[name] = f
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		f := all[n]
		h := &tar.Header{
			Name: n, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: created,
			Typeflag: tar.TypeReg, Size: int64(len(f.data)), Format: tar.FormatPAX,
		}
		if f.dir {
			h.Name += "/"
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
