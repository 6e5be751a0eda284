package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Retry timing of the URL source.
const (
	urlFirstRetry = time.Second
	urlMaxRetry   = 5 * time.Minute
)

// ValidateURL checks the arguments of [NewURL] without fetching anything:
// the URL must be https (http only for 127.0.0.1, ::1 and localhost) and
// the digest a hex sha256. Callers validating configuration use it to fail
// early; NewURL's Run reports the same errors.
func ValidateURL(rawURL, sha256 string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("url %q: %w", rawURL, err)
	}
	if err := checkScheme(u); err != nil {
		return err
	}
	if !isDigest(strings.ToLower(sha256)) {
		return fmt.Errorf("url %s: sha256 %q is not a hex sha256", u.Redacted(), sha256)
	}
	return nil
}

func checkScheme(u *url.URL) error {
	switch {
	case u.Scheme == "https" && u.Host != "":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("url %s: http is only allowed for localhost; use https", u.Redacted())
	default:
		return fmt.Errorf("url %q: want an https:// URL", u.Redacted())
	}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// NewURL returns a source that downloads the module at rawURL once and
// delivers it if its sha256 is the pinned one. A failed download (network
// error, a status other than 200, a body over MaxModuleSize) or a digest
// mismatch is reported to Handlers.Error and retried with exponential
// backoff (1s doubling to 5m, with jitter) until it succeeds or ctx ends.
// After the one delivery nothing changes: the version is pinned. Redirects
// must stay on https. client nil means a client with a 2 minute timeout.
func NewURL(rawURL, sha256 string, client *http.Client) Source {
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Minute}
	}
	c := *client
	next := client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := checkScheme(req.URL); err != nil {
			return fmt.Errorf("redirect: %w", err)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	shown := rawURL
	if u, err := url.Parse(rawURL); err == nil {
		shown = u.Redacted()
	}
	return &urlSource{url: rawURL, shown: shown, digest: strings.ToLower(sha256), client: &c, firstRetry: urlFirstRetry}
}

type urlSource struct {
	url        string
	shown      string // url without a password, for messages
	digest     string
	client     *http.Client
	firstRetry time.Duration
}

func (s *urlSource) Run(ctx context.Context, h Handlers) {
	defer func() { <-ctx.Done() }()
	if err := ValidateURL(s.url, s.digest); err != nil {
		h.error(err)
		return
	}
	wait := s.firstRetry
	for {
		module, err := s.fetch(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			h.version(Version{Module: module, Digest: s.digest, Origin: "url " + s.shown})
			return
		}
		h.error(err)
		t := time.NewTimer(wait/2 + rand.N(wait/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, urlMaxRetry)
	}
}

func (s *urlSource) fetch(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, fmt.Errorf("url %s: %w", s.shown, err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error // "Get <url>: ...": the url is already said
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("url %s: %w", s.shown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("url %s: %s", s.shown, resp.Status)
	}
	if resp.ContentLength > MaxModuleSize {
		return nil, fmt.Errorf("url %s: oversized: %d bytes, more than the %d allowed", s.shown, resp.ContentLength, MaxModuleSize)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxModuleSize+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("url %s: %w", s.shown, err)
	case len(b) > MaxModuleSize:
		return nil, fmt.Errorf("url %s: oversized: more than the %d bytes allowed", s.shown, MaxModuleSize)
	}
	if got := Digest(b); got != s.digest {
		return nil, fmt.Errorf("url %s: sha256 mismatch: downloaded sha256 %s, pinned %s", s.shown, got, s.digest)
	}
	return b, nil
}
