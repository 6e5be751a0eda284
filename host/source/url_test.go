package source

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func TestURL(t *testing.T) {
	module := testwasm.FakeModule(1, 5000)
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/gpu.wasm":
			w.Write(module)
		case "/flaky.wasm":
			if hits.Load() < 3 {
				http.Error(w, "try later", http.StatusServiceUnavailable)
				return
			}
			w.Write(module)
		case "/http":
			http.Redirect(w, r, "http://example.com/gpu.wasm", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	digest := Digest(module)

	t.Run("right pin", func(t *testing.T) {
		r := run(t, NewURL(srv.URL+"/gpu.wasm", strings.ToUpper(digest), srv.Client()))
		seen := 0
		e := r.next(t, &seen, 5*time.Second)
		if e.version == nil || e.version.Digest != digest || string(e.version.Module) != string(module) || e.version.Origin != "url "+srv.URL+"/gpu.wasm" {
			t.Fatalf("%s, want version %s", e, digest)
		}
		r.quiet(t, seen, 100*time.Millisecond)
	})

	t.Run("wrong pin", func(t *testing.T) {
		wrong := Digest([]byte("other"))
		src := NewURL(srv.URL+"/gpu.wasm", wrong, srv.Client())
		src.(*urlSource).firstRetry = 20 * time.Millisecond
		r := run(t, src)
		seen := 0
		want := fmt.Sprintf("url %s/gpu.wasm: sha256 mismatch: downloaded sha256 %s, pinned %s", srv.URL, digest, wrong)
		for range 2 { // reported, retried, reported again; never delivered
			if e := r.next(t, &seen, 5*time.Second); e.err == nil || e.err.Error() != want {
				t.Fatalf("%s, want error %q", e, want)
			}
		}
	})

	t.Run("retries", func(t *testing.T) {
		hits.Store(0)
		src := NewURL(srv.URL+"/flaky.wasm", digest, srv.Client())
		src.(*urlSource).firstRetry = 20 * time.Millisecond
		r := run(t, src)
		seen := 0
		want := "url " + srv.URL + "/flaky.wasm: 503 Service Unavailable"
		for range 2 {
			if e := r.next(t, &seen, 5*time.Second); e.err == nil || e.err.Error() != want {
				t.Fatalf("%s, want error %q", e, want)
			}
		}
		if e := r.next(t, &seen, 5*time.Second); e.version == nil || e.version.Digest != digest {
			t.Fatalf("%s, want the version after retries", e)
		}
	})

	t.Run("redirect to http", func(t *testing.T) {
		src := NewURL(srv.URL+"/http", digest, srv.Client())
		src.(*urlSource).firstRetry = time.Hour
		r := run(t, src)
		seen := 0
		want := "url " + srv.URL + "/http: redirect: url http://example.com/gpu.wasm: http is only allowed for localhost; use https"
		if e := r.next(t, &seen, 5*time.Second); e.err == nil || e.err.Error() != want {
			t.Fatalf("%s, want error %q", e, want)
		}
	})

	t.Run("not found", func(t *testing.T) {
		src := NewURL(srv.URL+"/nope.wasm", digest, srv.Client())
		src.(*urlSource).firstRetry = time.Hour
		r := run(t, src)
		seen := 0
		if e := r.next(t, &seen, 5*time.Second); e.err == nil || e.err.Error() != "url "+srv.URL+"/nope.wasm: 404 Not Found" {
			t.Fatalf("%s", e)
		}
	})
}

func TestValidateURL(t *testing.T) {
	d := Digest([]byte("x"))
	for _, tc := range []struct{ url, sha, want string }{
		{"https://example.com/gpu.wasm", d, ""},
		{"https://example.com/gpu.wasm", strings.ToUpper(d), ""},
		{"http://127.0.0.1:8080/gpu.wasm", d, ""},
		{"http://localhost/gpu.wasm", d, ""},
		{"http://localhost:8080/gpu.wasm", d, ""},
		{"http://[::1]:80/gpu.wasm", d, ""},
		{"http://example.com/gpu.wasm", d, "url http://example.com/gpu.wasm: http is only allowed for localhost; use https"},
		{"http://localhost.example.com/gpu.wasm", d, "url http://localhost.example.com/gpu.wasm: http is only allowed for localhost; use https"},
		{"ftp://example.com/gpu.wasm", d, "url ftp://example.com/gpu.wasm: want an https:// URL"},
		{"https:///gpu.wasm", d, "url https:///gpu.wasm: want an https:// URL"},
		{"/etc/gpu.wasm", d, "url /etc/gpu.wasm: want an https:// URL"},
		{"https://exa mple.com/gpu.wasm", d, `url https://exa mple.com/gpu.wasm: not a URL: invalid character " " in host name`},
		{"https://user:secret@example.com/gpu.wasm", "abc", `url https://user:xxxxx@example.com/gpu.wasm: sha256 "abc": want the module's sha256 as 64 hex digits, got 3 characters`},
		{"https://example.com/gpu.wasm", "", `url https://example.com/gpu.wasm: sha256 "": missing: a URL source is pinned by the module's sha256 (64 hex digits)`},
		{"https://example.com/gpu.wasm", "sha256:" + d[7:], `url https://example.com/gpu.wasm: sha256 "sha256:` + d[7:] + `": want the module's sha256 as 64 hex digits, without the "sha256:" prefix`},
		{"https://example.com/gpu.wasm", d[:63] + "g", `url https://example.com/gpu.wasm: sha256 "` + d[:63] + `g": want the module's sha256 as 64 hex digits, got 'g' at offset 63`},
	} {
		err := ValidateURL(tc.url, tc.sha)
		if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
			t.Errorf("ValidateURL(%q, %q): %v, want %q", tc.url, tc.sha, err, tc.want)
		}
	}
	// Both arguments wrong: a problem for each, the password redacted.
	ps := CheckURL("http://user:secret@example.com/gpu.wasm", "abc")
	if len(ps) != 2 || ps[0].Field != "url" || ps[0].Value != "http://user:xxxxx@example.com/gpu.wasm" || ps[1].Field != "sha256" || ps[1].Value != "abc" {
		t.Errorf("CheckURL: %+v, want a url and a sha256 problem", ps)
	}
	// Run reports an invalid URL once and waits for its context.
	r := run(t, NewURL("http://example.com/gpu.wasm", d, nil))
	seen := 0
	if e := r.next(t, &seen, 5*time.Second); e.err == nil {
		t.Fatalf("%s, want an error", e)
	}
}
