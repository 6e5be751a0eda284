// The chart is rendered with Helm, which needs the API machinery of the
// default minor: these tests run on it alone (make test), not in the older
// minors' smoke runs.

//go:build !k8s1.35 && !k8s1.36

package e2e

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/host/skew"
	"github.com/wasmsched/wasmsched/internal/chart"
	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/image"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// envImageLayout names an OCI layout make image wrote (CI: bin/image/oci
// after make image-ci): the image tests inspect and run that one instead
// of building their own.
const envImageLayout = "WASMSCHED_IMAGE_LAYOUT"

var builtImage struct {
	once   sync.Once
	layout string
	err    error
}

// imageLayout returns the OCI layout under test. Unless envImageLayout
// names one, the first call builds it as make image does, for linux/amd64
// only: kube-scheduler with CGO off (minutes cold, shared by the
// processes running these tests side by side) packed by internal/image.
func imageLayout(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv(envImageLayout); dir != "" {
		return dir
	}
	if testing.Short() {
		t.Skip("builds a static kube-scheduler and its image")
	}
	dir := testwasm.SharedDir(t)
	builtImage.once.Do(func() {
		bin := filepath.Join(dir, "linux-amd64", "kube-scheduler")
		out := filepath.Join(dir, "image", "oci")
		for _, d := range []string{filepath.Dir(bin), filepath.Dir(out)} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				builtImage.err = err
				return
			}
		}
		defer testwasm.Lock(t, out+".lock")()
		if _, err := os.Stat(out + ".built"); err == nil {
			builtImage.layout = out
			return
		}
		start := time.Now()
		build := exec.Command("make", "-s", "--no-print-directory", "build-scheduler", "SCHEDULER_ARCH=amd64", "SCHEDULER_LDFLAGS=-s -w", "SCHEDULER_OUT="+bin)
		build.Dir = testwasm.Root(t)
		if b, err := build.CombinedOutput(); err != nil {
			builtImage.err = fmt.Errorf("build kube-scheduler for linux/amd64: %v\n%s", err, b)
			return
		}
		c, err := chart.Load(testwasm.Root(t))
		if err != nil {
			builtImage.err = err
			return
		}
		if _, err := image.WriteLayout(out, []image.Options{{
			Version: "v" + c.Metadata.AppVersion, Minor: skew.Minor, Source: "https://github.com/wasmsched/wasmsched", Revision: "test",
			Created: time.Unix(1764000000, 0).UTC(), CABundle: "/etc/ssl/certs/ca-certificates.crt",
			Images: []image.Image{{Arch: "amd64", Binary: bin}},
		}}); err != nil {
			builtImage.err = err
			return
		}
		if err := os.WriteFile(out+".built", nil, 0o644); err != nil {
			builtImage.err = err
			return
		}
		t.Logf("built kube-scheduler (CGO off) and its image in %v", time.Since(start).Round(time.Second))
		builtImage.layout = out
	})
	if builtImage.err != nil {
		t.Fatal(builtImage.err)
	}
	if builtImage.layout == "" {
		t.Fatal("the image build failed in an earlier test")
	}
	return builtImage.layout
}

// layoutImages returns the images (by architecture) of the layout's
// index tagged v<version>-k8s<this minor>, checking every blob's digest
// first.
func layoutImages(t *testing.T, dir string) (map[string]v1.Image, string) {
	t.Helper()
	if err := image.Verify(dir); err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	suffix := "-k8s" + skew.Minor
	var tags []string
	for _, d := range im.Manifests {
		tag := d.Annotations[image.RefName]
		tags = append(tags, tag)
		if !strings.HasSuffix(tag, suffix) {
			continue
		}
		idx, err := top.ImageIndex(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		imgs := map[string]v1.Image{}
		for _, m := range ms.Manifests {
			if m.Platform == nil || m.Platform.OS != "linux" {
				t.Fatalf("%s: a manifest for %v", tag, m.Platform)
			}
			img, err := idx.Image(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			imgs[m.Platform.Architecture] = img
		}
		return imgs, tag
	}
	t.Fatalf("layout %s has no index tagged *%s (tags: %v)", dir, suffix, tags)
	return nil, ""
}

// layoutImage is layoutImages' image for linux/arch.
func layoutImage(t *testing.T, dir, arch string) (v1.Image, string) {
	t.Helper()
	imgs, tag := layoutImages(t, dir)
	img, ok := imgs[arch]
	if !ok {
		t.Fatalf("%s has no linux/%s image", tag, arch)
	}
	return img, tag
}

// entry is a file of an image's root filesystem as its layers say.
type entry struct {
	mode     int64
	uid, gid int
	typ      byte
	mtime    time.Time
}

// unpack writes the image's root filesystem under dir (owners are not
// set: the test is not root) and returns its entries by path.
func unpack(t *testing.T, img v1.Image, dir string) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]entry{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Clean(h.Name), "/")
		files[name] = entry{mode: h.Mode, uid: h.Uid, gid: h.Gid, typ: h.Typeflag, mtime: h.ModTime}
		target := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		default:
			t.Fatalf("%s: unexpected entry type %c in the image", h.Name, h.Typeflag)
		}
	}
}

// The image is what the chart's Deployment expects and nothing more: its
// config (entrypoint, user, environment, labels), exactly the files it
// should hold with their modes and owners, no shell, and a static
// kube-scheduler for the image's minor.
func TestImageContents(t *testing.T) {
	testwasm.Claim(t)
	imgs, tag := layoutImages(t, imageLayout(t))
	if _, ok := imgs["amd64"]; !ok {
		t.Errorf("%s has no linux/amd64 image", tag)
	}
	for arch, img := range imgs {
		t.Run(arch, func(t *testing.T) { checkImage(t, img, tag, arch) })
	}
}

func checkImage(t *testing.T, img v1.Image, tag, arch string) {
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{image.Entrypoint}) || len(c.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [%s] and no cmd", c.Entrypoint, c.Cmd, image.Entrypoint)
	}
	if c.User != image.User {
		t.Errorf("user %q, want %s", c.User, image.User)
	}
	for _, e := range []string{"WASMSCHED_CACHE_DIR=" + image.CacheDir, "SSL_CERT_FILE=" + image.CACertificates} {
		if !slices.Contains(c.Env, e) {
			t.Errorf("env %q lacks %s", c.Env, e)
		}
	}
	version := strings.TrimSuffix(tag, "-k8s"+skew.Minor)
	for k, want := range map[string]string{
		"org.opencontainers.image.version": version, image.LabelMinor: skew.Minor,
		"org.opencontainers.image.source": "https://github.com/wasmsched/wasmsched",
	} {
		if c.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], want)
		}
	}
	if c.Labels["org.opencontainers.image.revision"] == "" {
		t.Errorf("no org.opencontainers.image.revision label")
	}
	if cf.OS != "linux" || cf.Architecture != arch {
		t.Errorf("config says %s/%s", cf.OS, cf.Architecture)
	}

	root := t.TempDir()
	files := unpack(t, img, root)
	dirs := func(m int64, names ...string) map[string]entry {
		out := map[string]entry{}
		for _, n := range names {
			out[n] = entry{mode: m, typ: tar.TypeDir}
		}
		return out
	}
	want := dirs(0o755, "etc", "etc/ssl", "etc/ssl/certs", "home", "usr", "usr/local", "usr/local/bin", "var", "var/cache")
	want["tmp"] = entry{mode: 0o1777, typ: tar.TypeDir}
	want["home/nonroot"] = entry{mode: 0o700, uid: image.UID, gid: image.UID, typ: tar.TypeDir}
	want[image.CacheDir[1:]] = entry{mode: 0o755, uid: image.UID, gid: image.UID, typ: tar.TypeDir}
	for _, f := range []string{"etc/passwd", "etc/group", "etc/nsswitch.conf", image.CACertificates[1:]} {
		want[f] = entry{mode: 0o644, typ: tar.TypeReg}
	}
	want[image.Entrypoint[1:]] = entry{mode: 0o755, typ: tar.TypeReg}
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		got, w := files[n], want[n]
		if _, ok := want[n]; !ok {
			t.Errorf("the image holds %s, which it should not", n)
			continue
		}
		if got.mode != w.mode || got.uid != w.uid || got.gid != w.gid || got.typ != w.typ {
			t.Errorf("%s: mode %o owner %d:%d type %c, want mode %o owner %d:%d type %c", n, got.mode, got.uid, got.gid, got.typ, w.mode, w.uid, w.gid, w.typ)
		}
		if !got.mtime.Equal(cf.Created.Time) {
			t.Errorf("%s: modified %v, want the image's creation time %v (SOURCE_DATE_EPOCH)", n, got.mtime, cf.Created.Time)
		}
	}
	for n := range want {
		if _, ok := files[n]; !ok {
			t.Errorf("the image lacks %s", n)
		}
	}
	for _, sh := range []string{"bin/sh", "bin/bash", "usr/bin/sh", "bin/busybox"} {
		if _, ok := files[sh]; ok {
			t.Errorf("the image holds a shell, %s", sh)
		}
	}

	// A static binary: no interpreter, no shared libraries.
	bin := filepath.Join(root, image.Entrypoint)
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has a program interpreter: not static (CGO on?)", image.Entrypoint)
		}
	}
	if libs, _ := ef.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v", image.Entrypoint, libs)
	}
	if machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]; ef.Machine != machine {
		t.Errorf("%s is for %v, want %v", image.Entrypoint, ef.Machine, machine)
	}
	if arch != runtime.GOARCH {
		return
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if want := "Kubernetes v" + skew.Minor + "."; err != nil || !strings.Contains(string(out), want) {
		t.Errorf("%s --version = %q, %v; want %s<patch>", image.Entrypoint, out, err, want)
	}
}

// The install as an operator does it: the chart installed on a cluster
// enforcing RBAC with a SchedulingPolicy of its own, and the image's
// kube-scheduler (run from the unpacked root filesystem) with the
// chart's scheduler configuration and a token of the chart's service
// account binds a pod where that policy says.
func TestImageInstall(t *testing.T) {
	testwasm.Claim(t)
	dir := imageLayout(t)
	img, _ := layoutImage(t, dir, "amd64")
	root := t.TempDir()
	unpack(t, img, root)

	cp, err := controlplane.Start(context.Background(), controlplane.Options{TB: t, Authorization: "Node,RBAC"})
	if err != nil {
		t.Fatalf("control plane: %v", err)
	}
	c := &cluster{t: t, cp: cp, client: cp.Client()}
	ctx := context.Background()

	module := testwasm.Bytes(t, "examples/nodepin")
	modulePath := filepath.Join(t.TempDir(), "nodepin.wasm")
	if err := os.WriteFile(modulePath, module, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(module)
	r, took := c.installChart(map[string]any{
		"policies": []any{map[string]any{"name": "nodepin", "spec": map[string]any{
			"module":   map[string]any{"sha256": hex.EncodeToString(sum[:]), "file": modulePath},
			"settings": map[string]any{"nodes": []any{"two"}},
		}}},
	})
	t.Logf("chart installed: %d objects in %v", len(r.Manifests), took.Round(time.Millisecond))

	// What the pod's service account token would be.
	tr, err := c.client.CoreV1().ServiceAccounts(policyNamespace).CreateToken(ctx, "wasmsched-scheduler",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of the chart's service account: %v", err)
	}
	asAccount := rest.AnonymousClientConfig(cp.RestConfig())
	asAccount.BearerToken = tr.Status.Token
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfigFile(kubeconfig, asAccount); err != nil {
		t.Fatal(err)
	}
	// The chart's configuration, with the kubeconfig a pod gets from its
	// service account (in-cluster) spelled out.
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(schedulerConfigOf(t, r)), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["clientConnection"] = map[string]any{"kubeconfig": kubeconfig}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The Deployment's environment: the compilation cache in the image's
	// writable directory.
	t.Setenv("WASMSCHED_CACHE_DIR", filepath.Join(root, image.CacheDir))

	rep := startBinary(t, filepath.Join(root, image.Entrypoint), "image kube-scheduler", cfgPath)
	c.node("one", nil)
	c.node("two", nil)
	c.pod("via-chart", func(p *corev1.Pod) { p.Spec.SchedulerName = "wasmsched" })
	if node := c.waitBound("via-chart", 120*time.Second); node != "two" {
		t.Fatalf("bound to %s, want two (the chart's policy's choice)", node)
	}
	rep.stop()
	for _, l := range strings.Split(rep.out.String(), "\n") {
		if strings.Contains(l, "forbidden") {
			t.Errorf("the scheduler was refused a request it needs: %s", l)
		}
	}
}
