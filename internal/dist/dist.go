// Package dist packs the policy author's CLI as release archives (make
// dist): per platform a .tar.gz (a .zip for Windows) holding wasmsched and
// its kubectl plugin name, a SHA256SUMS file over them, and a krew plugin
// manifest carrying those checksums. Archives are reproducible: entries in
// a fixed order, owned by root, every time the commit's
// (SOURCE_DATE_EPOCH).
package dist

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Platform is a GOOS/GOARCH pair a release is built for.
type Platform struct{ OS, Arch string }

// Platforms are the platforms make dist builds.
var Platforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"}}

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Exe is the CLI's file name on p.
func (p Platform) Exe() string {
	if p.OS == "windows" {
		return "wasmsched.exe"
	}
	return "wasmsched"
}

// Archive is the archive's file name for version on p.
func (p Platform) Archive(version string) string {
	ext := ".tar.gz"
	if p.OS == "windows" {
		ext = ".zip"
	}
	return fmt.Sprintf("wasmsched_%s_%s_%s%s", version, p.OS, p.Arch, ext)
}

// PluginName is the name kubectl runs the CLI by (kubectl wasmsched ...).
const PluginName = "kubectl-wasmsched"

// Pack writes p's archive of the binary exe (and the files extra, by
// their base names) into dir and returns its path. Unix archives also hold
// PluginName, a symbolic link to the binary.
func Pack(dir, version string, p Platform, exe string, extra []string, created time.Time) (string, error) {
	bin, err := os.ReadFile(exe)
	if err != nil {
		return "", err
	}
	type entry struct {
		name, link string
		mode       int64
		data       []byte
	}
	entries := []entry{{name: p.Exe(), mode: 0o755, data: bin}}
	if p.OS != "windows" {
		entries = append(entries, entry{name: PluginName, link: p.Exe(), mode: 0o777})
	}
	for _, f := range extra {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		entries = append(entries, entry{name: filepath.Base(f), mode: 0o644, data: b})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	if p.OS == "windows" {
		zw := zip.NewWriter(&buf)
		for _, e := range entries {
			h := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: created}
			h.SetMode(os.FileMode(e.mode))
			w, err := zw.CreateHeader(h)
			if err != nil {
				return "", err
			}
			if _, err := w.Write(e.data); err != nil {
				return "", err
			}
		}
		if err := zw.Close(); err != nil {
			return "", err
		}
	} else {
		gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		tw := tar.NewWriter(gz)
		for _, e := range entries {
			h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: created, Typeflag: tar.TypeReg, Size: int64(len(e.data)), Format: tar.FormatPAX}
			if e.link != "" {
				h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
			}
			if err := tw.WriteHeader(h); err != nil {
				return "", err
			}
			if _, err := tw.Write(e.data); err != nil {
				return "", err
			}
		}
		if err := tw.Close(); err != nil {
			return "", err
		}
		if err := gz.Close(); err != nil {
			return "", err
		}
	}
	out := filepath.Join(dir, p.Archive(version))
	return out, os.WriteFile(out, buf.Bytes(), 0o644)
}

// Sum is a file's sha256 as hex.
func Sum(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// WriteSums writes SHA256SUMS into dir for files (as sha256sum -c reads
// it) and returns each file's sum by base name.
func WriteSums(dir string, files []string) (map[string]string, error) {
	sums := map[string]string{}
	var b strings.Builder
	sorted := append([]string(nil), files...)
	sort.Strings(sorted)
	for _, f := range sorted {
		s, err := Sum(f)
		if err != nil {
			return nil, err
		}
		sums[filepath.Base(f)] = s
		fmt.Fprintf(&b, "%s  %s\n", s, filepath.Base(f))
	}
	return sums, os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}

// KrewManifest is the krew plugin manifest (krew install
// --manifest=wasmsched.yaml --archive=...) for version, its archives
// downloaded from baseURL/<archive> and checked against sums.
func KrewManifest(version, baseURL string, sums map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: wasmsched
spec:
  version: %s
  homepage: https://github.com/wasmsched/wasmsched
  shortDescription: Build, test, push and roll back WebAssembly scheduling policies
  description: |
    wasmsched manages the WebAssembly policies of the wasmsched scheduler:
    it evaluates and tests a policy offline, packs and pushes it as a
    SchedulingPolicy, shows what each scheduler replica runs, diffs and
    rolls back revisions.
  caveats: |
    The cluster needs the wasmsched scheduler (its Helm chart or manifests/).
  platforms:
`, version)
	for _, p := range Platforms {
		a := p.Archive(version)
		fmt.Fprintf(&b, `  - selector:
      matchLabels:
        os: %s
        arch: %s
    uri: %s/%s
    sha256: %s
    bin: %s
`, p.OS, p.Arch, strings.TrimRight(baseURL, "/"), a, sums[a], p.Exe())
	}
	return b.String()
}
