package dist

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// Every platform's archive holds the binary (and, on Unix, its kubectl
// plugin name); two packings are byte for byte equal; SHA256SUMS checks
// with sha256sum -c; the krew manifest carries the same sums.
func TestPack(t *testing.T) {
	bin, out := t.TempDir(), t.TempDir()
	created := time.Unix(1764000000, 0).UTC()
	var archives []string
	for _, p := range Platforms {
		exe := filepath.Join(bin, p.OS+"-"+p.Arch, p.Exe())
		if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(exe, []byte("binary for "+p.String()), 0o755); err != nil {
			t.Fatal(err)
		}
		a, err := Pack(out, "v0.1.0", p, exe, nil, created)
		if err != nil {
			t.Fatal(err)
		}
		first, _ := os.ReadFile(a)
		if _, err := Pack(out, "v0.1.0", p, exe, nil, created); err != nil {
			t.Fatal(err)
		}
		second, _ := os.ReadFile(a)
		if !bytes.Equal(first, second) {
			t.Errorf("%s: two packings differ", p)
		}
		names := entries(t, a, p)
		want := []string{"kubectl-wasmsched -> wasmsched", "wasmsched: binary for " + p.String()}
		if p.OS == "windows" {
			want = []string{"wasmsched.exe: binary for windows/amd64"}
		}
		if strings.Join(names, "|") != strings.Join(want, "|") {
			t.Errorf("%s: archive holds %q, want %q", p, names, want)
		}
		archives = append(archives, a)
	}
	sums, err := WriteSums(out, archives)
	if err != nil {
		t.Fatal(err)
	}
	if path, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command(path, "-c", "SHA256SUMS")
		cmd.Dir = out
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c SHA256SUMS: %v\n%s", err, b)
		}
	}
	var m struct {
		Metadata struct{ Name string }
		Spec     struct {
			Version   string
			Platforms []struct {
				Selector         struct{ MatchLabels map[string]string }
				URI, Sha256, Bin string
			}
		}
	}
	if err := yaml.Unmarshal([]byte(KrewManifest("v0.1.0", "https://example.com/r/", sums)), &m); err != nil {
		t.Fatal(err)
	}
	if m.Metadata.Name != "wasmsched" || m.Spec.Version != "v0.1.0" || len(m.Spec.Platforms) != len(Platforms) {
		t.Fatalf("krew manifest: %+v", m)
	}
	for i, p := range m.Spec.Platforms {
		a := Platforms[i].Archive("v0.1.0")
		if p.Sha256 != sums[a] || p.URI != "https://example.com/r/"+a || p.Selector.MatchLabels["os"] != Platforms[i].OS || p.Bin != Platforms[i].Exe() {
			t.Errorf("krew platform %d: %+v, want %s with sum %s", i, p, a, sums[a])
		}
	}
}

// entries lists an archive's entries as "name: content" or "name -> link".
func entries(t *testing.T, path string, p Platform) []string {
	t.Helper()
	var out []string
	if p.OS == "windows" {
		zr, err := zip.OpenReader(path)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		for _, f := range zr.File {
			rc, _ := f.Open()
			b, _ := io.ReadAll(rc)
			rc.Close()
			out = append(out, f.Name+": "+string(b))
		}
		return out
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeSymlink {
			out = append(out, h.Name+" -> "+h.Linkname)
			continue
		}
		b, _ := io.ReadAll(tr)
		out = append(out, h.Name+": "+string(b))
	}
}
