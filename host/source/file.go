package source

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"
)

// DefaultPoll is how often a file source looks at its file by default.
const DefaultPoll = time.Second

// NewFile returns a source that watches the module at path. It reads the
// file at start, then looks at its modification time, size and identity
// every poll (DefaultPoll if poll <= 0). A change is read once the file has
// stopped changing for one poll, so a copy in progress is not delivered
// half-written; a change is therefore picked up within two polls. The bytes
// read are delivered when their digest differs from the last delivered
// (rewriting the same bytes delivers nothing). A file that is missing,
// unreadable or larger than MaxModuleSize is reported to Handlers.Error,
// once until the problem changes, and the source keeps polling.
//
// Following symbolic links, it also sees a ConfigMap volume update (the
// kubelet swaps a symlink).
func NewFile(path string, poll time.Duration) Source {
	if poll <= 0 {
		poll = DefaultPoll
	}
	return &fileSource{path: path, poll: poll}
}

type fileSource struct {
	path string
	poll time.Duration
}

// stamp identifies a state of the file cheaply.
type stamp struct {
	info os.FileInfo
}

func (a stamp) same(b stamp) bool {
	if a.info == nil || b.info == nil {
		return a.info == nil && b.info == nil
	}
	return os.SameFile(a.info, b.info) && a.info.Size() == b.info.Size() && a.info.ModTime().Equal(b.info.ModTime())
}

func (s *fileSource) Run(ctx context.Context, h Handlers) {
	var (
		lastDigest string
		lastErr    string
		read       stamp // the state last read (or failed to read)
		prev       stamp // the state seen at the previous poll
	)
	report := func(err error) {
		if msg := err.Error(); msg != lastErr {
			lastErr = msg
			lastDigest = "" // the next version repairs the failure: deliver it
			h.error(err)
		}
	}
	load := func() {
		before, err := os.Stat(s.path)
		if err != nil {
			read, prev = stamp{}, stamp{}
			report(fmt.Errorf("file %s: %w", s.path, err))
			return
		}
		module, err := readModule(s.path)
		after, serr := os.Stat(s.path)
		read = stamp{before}
		prev = read
		if serr == nil && !read.same(stamp{after}) {
			// Written to while we read: look again once it settles.
			read, prev = stamp{}, stamp{after}
			return
		}
		if err != nil {
			read = stamp{} // try again at the next poll
			report(err)
			return
		}
		sigs, err := ReadDetachedSignatures(s.path)
		if err != nil {
			read = stamp{}
			report(err)
			return
		}
		lastErr = ""
		d := Digest(module)
		if d != lastDigest {
			lastDigest = d
			h.version(Version{Module: module, Digest: d, Origin: "file " + s.path, Signatures: sigs})
		}
	}
	load()
	t := time.NewTicker(s.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		info, err := os.Stat(s.path)
		if err != nil {
			read, prev = stamp{}, stamp{}
			report(fmt.Errorf("file %s: %w", s.path, err))
			continue
		}
		now := stamp{info}
		switch {
		case now.same(read):
			prev = now
		case now.same(prev):
			load() // changed, and settled since the last poll
		default:
			prev = now
		}
	}
}

// readModule reads a file of at most MaxModuleSize bytes.
func readModule(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("file %s: %w", path, err)
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > MaxModuleSize {
		return nil, fmt.Errorf("file %s: oversized: more than the %d bytes allowed", path, MaxModuleSize)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxModuleSize+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("file %s: %w", path, err)
	case len(b) > MaxModuleSize:
		return nil, fmt.Errorf("file %s: oversized: more than the %d bytes allowed", path, MaxModuleSize)
	case len(b) == 0:
		return nil, fmt.Errorf("file %s: empty", path)
	}
	return b, nil
}
