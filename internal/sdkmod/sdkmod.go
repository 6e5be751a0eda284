// Package sdkmod knows the SDK's own modules, abi and guest, which policy
// authors require from their repositories: which they are, the version the
// scheduler's module requires them at, and how to serve that version from
// this checkout as a module proxy on disk (WriteProxy), so that a module
// outside the workspace (the SDK modules with GOWORK=off, an author's
// module in a test) resolves them before they are tagged. Its tests hold
// the modules to their promise: no replace directive, nothing from k8s.io or
// from the scheduler's module.
//
// It reads the repository and writes only where it is told; it never
// changes the repository. It is used by tests and by `make sdk-proxy`.
package sdkmod

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// RootPath is the module path of the scheduler, the repository's root
// module.
const RootPath = "github.com/wasmsched/wasmsched"

// Dirs are the SDK's modules, as directories of the repository, in
// dependency order.
var Dirs = []string{"abi", "guest"}

// Module is one SDK module of the checkout.
type Module struct {
	// Dir is its directory, relative to the repository root ("abi").
	Dir string
	// Path is its module path; Version the version the root module
	// requires it at, which is the version this checkout would be tagged
	// as (the tag is Dir + "/" + Version).
	Path, Version string
	// File is its parsed go.mod.
	File *modfile.File
}

// Modules reads the SDK modules of the repository at root and the version
// the root go.mod requires each at.
func Modules(root string) ([]Module, error) {
	rootMod, err := parse(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	var out []Module
	for _, d := range Dirs {
		f, err := parse(filepath.Join(root, d, "go.mod"))
		if err != nil {
			return nil, err
		}
		m := Module{Dir: d, Path: f.Module.Mod.Path, File: f}
		for _, r := range rootMod.Require {
			if r.Mod.Path == m.Path {
				m.Version = r.Mod.Version
			}
		}
		if m.Version == "" {
			return nil, fmt.Errorf("go.mod does not require %s", m.Path)
		}
		out = append(out, m)
	}
	return out, nil
}

func parse(file string) (*modfile.File, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return modfile.Parse(file, b, nil)
}

// WriteProxy writes, into dir, a module proxy (for GOPROXY=file://dir)
// that serves each module at its Version with the files of root/Dir that
// git would commit (tracked or untracked, not ignored), as they are in the
// work tree: what the proxy would serve for the tag Dir/Version made on a
// commit of this tree, and so the same go.sum hash.
func WriteProxy(dir, root string, mods []Module) error {
	for _, m := range mods {
		if err := writeVersion(dir, root, m); err != nil {
			return fmt.Errorf("%s@%s: %w", m.Path, m.Version, err)
		}
	}
	return nil
}

func writeVersion(dir, root string, m Module) error {
	esc, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	v := filepath.Join(dir, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(v, 0o755); err != nil {
		return err
	}
	files, err := moduleFiles(root, m.Dir)
	if err != nil {
		return err
	}
	var zip bytes.Buffer
	if err := modzip.Create(&zip, module.Version{Path: m.Path, Version: m.Version}, files); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(root, m.Dir, "go.mod"))
	if err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{
		"list":              []byte(m.Version + "\n"),
		m.Version + ".info": info,
		m.Version + ".mod":  gomod,
		m.Version + ".zip":  zip.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(v, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// moduleFiles lists the files of root/sub that git would commit.
func moduleFiles(root, sub string) ([]modzip.File, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", sub)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files %s: %v: %s", sub, err, stderr.String())
	}
	var files []modzip.File
	for _, name := range strings.Split(string(out), "\x00") {
		if name == "" {
			continue
		}
		full := filepath.Join(root, filepath.FromSlash(name))
		fi, err := os.Lstat(full)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			return nil, err
		}
		files = append(files, file{rel: strings.TrimPrefix(name, sub+"/"), full: full, info: fi})
	}
	return files, nil
}

// file is a file of the work tree, as modzip wants it.
type file struct {
	rel, full string
	info      os.FileInfo
}

func (f file) Path() string                 { return path.Clean(f.rel) }
func (f file) Lstat() (os.FileInfo, error)  { return f.info, nil }
func (f file) Open() (io.ReadCloser, error) { return os.Open(f.full) }

// Env returns the environment that resolves the SDK modules from the proxy
// WriteProxy wrote to proxyDir, outside the workspace, with modcache as
// the module cache: the proxy first, then the module cache in use (which
// holds every other dependency already, so nothing is downloaded), then
// the proxies in use. Checksums of the SDK modules are not looked up in a
// checksum database, which has never seen them.
func Env(proxyDir, modcache string) ([]string, error) {
	out, err := exec.Command("go", "env", "GOMODCACHE", "GOPROXY").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		return nil, fmt.Errorf("go env: unexpected output %q", out)
	}
	proxies := []string{"file://" + filepath.ToSlash(proxyDir)}
	if lines[0] != "" {
		proxies = append(proxies, "file://"+filepath.ToSlash(filepath.Join(lines[0], "cache", "download")))
	}
	if lines[1] != "" && lines[1] != "off" {
		proxies = append(proxies, lines[1])
	}
	return []string{
		"GOWORK=off",
		"GOPROXY=" + strings.Join(proxies, ","),
		"GONOSUMDB=" + RootPath,
		"GOMODCACHE=" + modcache,
	}, nil
}
