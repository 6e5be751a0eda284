package image

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// RefName is the annotation of index.json naming a tag (OCI image layout).
const RefName = "org.opencontainers.image.ref.name"

// WriteLayout writes each minor's index into a new OCI image layout at
// dir (emptied first), tagged with its Tag, in the order given, and
// returns the tags with their digests.
func WriteLayout(dir string, builds []Options) ([]Tagged, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, err
	}
	var tags []Tagged
	for _, o := range builds {
		idx, err := Index(o)
		if err != nil {
			return nil, err
		}
		if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{RefName: o.Tag()})); err != nil {
			return nil, fmt.Errorf("write %s: %w", o.Tag(), err)
		}
		d, err := idx.Digest()
		if err != nil {
			return nil, err
		}
		tags = append(tags, Tagged{Tag: o.Tag(), Digest: d})
	}
	return tags, nil
}

// Tagged is a tag of the layout and its index's digest.
type Tagged struct {
	Tag    string
	Digest v1.Hash
}

// WriteArchive writes the layout at dir as an oci-archive tarball (the
// layout's files in path order, owned by root, every time created), which
// podman load, skopeo copy oci-archive:... and docker load (25 and later)
// read.
func WriteArchive(dir, out string, created time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, p := range names {
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: created, Typeflag: tar.TypeReg, Size: fi.Size(), Format: tar.FormatPAX}
		if fi.IsDir() {
			h.Name += "/"
			h.Mode, h.Typeflag, h.Size = 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.IsDir() {
			src, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, src)
			src.Close()
			if err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// Verify reads the layout at dir as a user's tool would and checks that
// every blob index.json reaches (indexes, manifests, configs, layers)
// has the digest and size its descriptor says. The first mismatch is an
// error naming the blob and the descriptor that points to it.
func Verify(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	var top v1.IndexManifest
	if err := json.Unmarshal(data, &top); err != nil {
		return fmt.Errorf("OCI layout %s: index.json: %w", dir, err)
	}
	var walk func(from string, d v1.Descriptor) error
	walk = func(from string, d v1.Descriptor) error {
		blob, err := readBlob(dir, d)
		if err != nil {
			return fmt.Errorf("OCI layout %s: %s (%s, from %s): %w", dir, d.Digest, d.MediaType, from, err)
		}
		switch {
		case d.MediaType.IsIndex():
			var idx v1.IndexManifest
			if err := json.Unmarshal(blob, &idx); err != nil {
				return err
			}
			for _, m := range idx.Manifests {
				if err := walk("index "+d.Digest.String(), m); err != nil {
					return err
				}
			}
		case d.MediaType.IsImage():
			var m v1.Manifest
			if err := json.Unmarshal(blob, &m); err != nil {
				return err
			}
			if err := walk("manifest "+d.Digest.String(), m.Config); err != nil {
				return err
			}
			for _, l := range m.Layers {
				if err := walk("manifest "+d.Digest.String(), l); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, d := range top.Manifests {
		if err := walk("index.json", d); err != nil {
			return err
		}
	}
	return nil
}

// readBlob reads the blob d points to and checks its size and digest.
func readBlob(dir string, d v1.Descriptor) ([]byte, error) {
	if d.Digest.Algorithm != "sha256" {
		return nil, fmt.Errorf("digest algorithm %q, want sha256", d.Digest.Algorithm)
	}
	b, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", d.Digest.Hex))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != d.Size {
		return nil, fmt.Errorf("blob is %d bytes, its descriptor says %d", len(b), d.Size)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != d.Digest.Hex {
		return nil, fmt.Errorf("blob's content has digest sha256:%s, not the one that names it", got)
	}
	return b, nil
}

// Size is one image's size in a layout.
type Size struct {
	Tag, Arch                string
	Compressed, Uncompressed int64
}

// Sizes lists every image of the layout at dir with its layers' sizes.
func Sizes(dir string) ([]Size, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []Size
	for _, d := range im.Manifests {
		idx, err := top.ImageIndex(d.Digest)
		if err != nil {
			return nil, err
		}
		ms, err := idx.IndexManifest()
		if err != nil {
			return nil, err
		}
		for _, m := range ms.Manifests {
			img, err := idx.Image(m.Digest)
			if err != nil {
				return nil, err
			}
			layers, err := img.Layers()
			if err != nil {
				return nil, err
			}
			s := Size{Tag: d.Annotations[RefName], Arch: m.Platform.Architecture}
			for _, l := range layers {
				c, err := l.Size()
				if err != nil {
					return nil, err
				}
				u, err := uncompressedSize(l)
				if err != nil {
					return nil, err
				}
				s.Compressed += c
				s.Uncompressed += u
			}
			out = append(out, s)
		}
	}
	return out, nil
}

func uncompressedSize(l v1.Layer) (int64, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	return io.Copy(io.Discard, rc)
}
