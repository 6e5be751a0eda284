package source

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/host/source/cmformat"
)

// Modules cached on the scheduler's disk.
//
// A statically configured policy whose source is broken at start-up (its
// ConfigMaps damaged by a bad upload, its file replaced) falls back to its
// last good module. The bytes of that module may be nowhere in the
// cluster any more, so the scheduler keeps them in a directory of its own,
// named by digest: on the Deployment's cache volume, which outlives a
// restart of the container (a crash loop), though not a new pod on
// another node.

// MaxCached bounds the modules a Cache keeps; the least recently written
// go first. Each is at most MaxModuleSize bytes.
const MaxCached = 32

// staleTemp is the age at which a temporary file of an interrupted Put is
// removed.
const staleTemp = time.Hour

var timeNow = time.Now

// Cache is a directory of modules named by their sha256. What it returns
// has been read back and checked against the digest asked for, so a
// damaged or planted file is an error, never another module. Its methods
// are safe for concurrent use, also by several processes sharing the
// directory: files are written whole and renamed into place.
type Cache struct {
	dir string
}

// OpenCache returns the cache in dir, creating the directory (0700).
func OpenCache(dir string) (*Cache, error) {
	if dir == "" {
		return nil, errors.New("module cache: no directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("module cache: %w", err)
	}
	return &Cache{dir: dir}, nil
}

// Dir is the cache's directory.
func (c *Cache) Dir() string { return c.dir }

func (c *Cache) path(digest string) string { return filepath.Join(c.dir, digest+".wasm") }

// Put stores module under its digest (a module already there is only
// touched) and drops the oldest modules beyond MaxCached.
func (c *Cache) Put(module []byte) error {
	if len(module) > MaxModuleSize {
		return fmt.Errorf("module cache: module of %d bytes is over the limit of %d", len(module), MaxModuleSize)
	}
	d := Digest(module)
	p := c.path(d)
	if v, err := c.Get(d); err == nil && v.Digest == d {
		now := timeNow()
		_ = os.Chtimes(p, now, now)
		return nil
	}
	tmp, err := os.CreateTemp(c.dir, ".put-*")
	if err != nil {
		return fmt.Errorf("module cache: %w", err)
	}
	_, werr := tmp.Write(module)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("module cache: write %s: %w", d, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("module cache: %w", err)
	}
	// The cache's own clock orders what prune drops.
	now := timeNow()
	_ = os.Chtimes(p, now, now)
	c.prune()
	return nil
}

// Get reads the module digest from the cache. A module not cached is an
// error wrapping fs.ErrNotExist.
func (c *Cache) Get(digest string) (Version, error) {
	if !cmformat.IsDigest(digest) {
		return Version{}, fmt.Errorf("module cache: %q is not a sha256 digest", digest)
	}
	p := c.path(digest)
	module, err := readModule(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Version{}, fmt.Errorf("module %s is not in the scheduler's module cache (%s): %w", digest, c.dir, fs.ErrNotExist)
		}
		return Version{}, fmt.Errorf("module cache: %w", err)
	}
	if got := Digest(module); got != digest {
		return Version{}, fmt.Errorf("module cache: %s holds a module of sha256 %s, not %s", p, got, digest)
	}
	return Version{Module: module, Digest: digest, Origin: "module cache " + p}, nil
}

// prune drops the least recently written modules beyond MaxCached, and
// temporary files a crash left behind.
func (c *Cache) prune() {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	type file struct {
		name string
		mod  int64
	}
	var files []file
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		if strings.HasPrefix(e.Name(), ".put-") && timeNow().Sub(info.ModTime()) > staleTemp {
			_ = os.Remove(filepath.Join(c.dir, e.Name()))
			continue
		}
		if strings.HasSuffix(e.Name(), ".wasm") {
			files = append(files, file{e.Name(), info.ModTime().UnixNano()})
		}
	}
	if len(files) <= MaxCached {
		return
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mod > files[j].mod })
	for _, f := range files[MaxCached:] {
		_ = os.Remove(filepath.Join(c.dir, f.name))
		_ = os.Remove(filepath.Join(c.dir, strings.TrimSuffix(f.name, ".wasm")+sigSuffix))
	}
}
