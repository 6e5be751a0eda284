package source

import (
	"context"
	"crypto/sha256"
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

// A URLProblem is what is wrong with one argument of a URL source.
type URLProblem struct {
	// Field is the argument: "url" or "sha256".
	Field string
	// Value is the argument as it may be shown: a URL's password is
	// redacted.
	Value string
	// Reason says what is wrong, without repeating Value.
	Reason string
}

// CheckURL returns what is wrong with the arguments of [NewURL], nothing
// when it can use them, without fetching anything: the URL must be https
// with a host (http only to a loopback host: localhost, 127.0.0.1, ::1,
// for tests and local mirrors) and the digest the module's sha256 as 64
// hex digits, in either case. It is the one place these rules live: the
// plugin's argument validation reports each problem against its field, and
// NewURL's Run reports the first (see [ValidateURL]).
func CheckURL(rawURL, sha256 string) []URLProblem {
	var ps []URLProblem
	shown := redacted(rawURL)
	if u, err := url.Parse(rawURL); err != nil {
		var ue *url.Error // "parse <url>: ...": the url is said by Value
		if errors.As(err, &ue) {
			err = ue.Err
		}
		ps = append(ps, URLProblem{Field: "url", Value: shown, Reason: "not a URL: " + err.Error()})
	} else if reason := schemeProblem(u); reason != "" {
		ps = append(ps, URLProblem{Field: "url", Value: shown, Reason: reason})
	}
	if reason := digestProblem(sha256); reason != "" {
		ps = append(ps, URLProblem{Field: "sha256", Value: sha256, Reason: reason})
	}
	return ps
}

// ValidateURL is [CheckURL] for callers that want one error: the first
// problem, naming the URL. NewURL's Run reports it.
func ValidateURL(rawURL, sha256 string) error {
	ps := CheckURL(rawURL, sha256)
	if len(ps) == 0 {
		return nil
	}
	if p := ps[0]; p.Field == "sha256" {
		return fmt.Errorf("url %s: sha256 %q: %s", redacted(rawURL), p.Value, p.Reason)
	}
	return fmt.Errorf("url %s: %s", ps[0].Value, ps[0].Reason)
}

// redacted is rawURL with its password replaced by xxxxx, or rawURL when
// it does not parse.
func redacted(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		return u.Redacted()
	}
	return rawURL
}

// schemeProblem says why u may not be fetched, "" when it may.
func schemeProblem(u *url.URL) string {
	switch {
	case u.Scheme == "https" && u.Host != "":
		return ""
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return ""
	case u.Scheme == "http":
		return "http is only allowed for localhost; use https"
	default:
		return "want an https:// URL"
	}
}

// digestProblem says why d is not a pinned digest, "" when it is one.
func digestProblem(d string) string {
	const want = "want the module's sha256 as 64 hex digits"
	switch {
	case d == "":
		return "missing: a URL source is pinned by the module's sha256 (64 hex digits)"
	case strings.HasPrefix(d, "sha256:"):
		return want + `, without the "sha256:" prefix`
	case len(d) != 2*sha256.Size:
		return fmt.Sprintf("%s, got %d characters", want, len(d))
	}
	for i, c := range []byte(d) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return fmt.Sprintf("%s, got %q at offset %d", want, c, i)
		}
	}
	return ""
}

// checkScheme is schemeProblem as an error naming the URL (redirects).
func checkScheme(u *url.URL) error {
	if reason := schemeProblem(u); reason != "" {
		return fmt.Errorf("url %s: %s", u.Redacted(), reason)
	}
	return nil
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
