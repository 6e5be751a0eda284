package lifecycle

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// A static policy naming a tag with allowTag: the tag is resolved once and
// recorded in the policy's state; the module it named serves. Once the tag
// has moved to other bytes, fetching the policy again still pins the
// digest recorded, with the registry up or down; a new resolve token
// resolves the tag again, to the new module.
func TestStaticOCITagPinned(t *testing.T) {
	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	opts := source.OCIOptions{Transport: srv.Client().Transport}
	host := strings.TrimPrefix(srv.URL, "https://")
	ctx := context.Background()
	a := testwasm.Bytes(t, "test/guests/versions/a")
	b := testwasm.Bytes(t, "test/guests/versions/b")
	pa1, err := source.PushOCI(ctx, host+"/p/pin:stable", a, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	args := Args{Policies: []PolicyArgs{testArgs(t, `{"name": "pin", "source": {"oci": "oci://`+host+`/p/pin:stable", "allowTag": true}}`)},
		Probation: &metav1.Duration{Duration: time.Second}}
	SetDefaults(&args)
	cache, err := source.OpenCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := Start(&args, Options{ModuleCache: cache, OCI: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if d := l.Roster().Slot("pin").currentDigest(); d != source.Digest(a) {
		t.Fatalf("serving %q, want the module the tag named, %s", d, source.Digest(a))
	}
	res := state(l, "pin").Resolved
	if res == nil || res.Tag != "oci://"+host+"/p/pin:stable" || res.Digest != pa1.DigestStr() || res.SHA256 != source.Digest(a) || res.ResolveToken != "" {
		t.Fatalf("state.resolved %+v, want the tag resolved to %s", res, pa1.DigestStr())
	}

	pb, err := source.PushOCI(ctx, host+"/p/pin:stable", b, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	st := l.cat.store.(*staticStore)
	pa := args.Policies[0]
	ref, sum, err := st.pinTag(ctx, pa)
	if err != nil || ref != "oci://"+pa1.String() || sum != source.Digest(a) {
		t.Fatalf("after the tag moved: %s %s %v, want the digest resolved first, %s", ref, sum, err, pa1)
	}
	pa.Source.ResolveToken = "2"
	ref, sum, err = st.pinTag(ctx, pa)
	if err != nil || ref != "oci://"+pb.String() || sum != source.Digest(b) {
		t.Fatalf("a new resolve token: %s %s %v, want the tag's new digest %s", ref, sum, err, pb)
	}
	if res := state(l, "pin").Resolved; res.Digest != pb.DigestStr() || res.ResolveToken != "2" {
		t.Errorf("state.resolved %+v after resolving again, want %s for token 2", res, pb.DigestStr())
	}
	srv.Close()
	if ref, _, err = st.pinTag(ctx, pa); err != nil || ref != "oci://"+pb.String() {
		t.Errorf("registry down: %s %v, want the recorded digest without asking the registry", ref, err)
	}
	pa.Source.ResolveToken = "3"
	if _, _, err = st.pinTag(ctx, pa); err == nil || !strings.Contains(err.Error(), "resolving the tag") {
		t.Errorf("registry down, a new token: %v, want the resolution's failure", err)
	}
}

// Tags in static arguments need the opt-in, written out.
func TestStaticOCITagArgs(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	for policy, want := range map[string]string{
		`{"name": "p", "source": {"oci": "oci://r.example/p:v1", "sha256": "` + sum + `"}}`:                                      "opt in to a tag with allowTag",
		`{"name": "p", "source": {"oci": "oci://r.example/p", "allowTag": true}}`:                                                "no tag: write the tag out",
		`{"name": "p", "source": {"file": "/p.wasm", "allowTag": true}}`:                                                         "source.allowTag",
		`{"name": "p", "source": {"oci": "oci://r.example/p@sha256:` + sum + `", "sha256": "` + sum + `", "resolveToken": "1"}}`: "only meaningful with an oci tag",
		`{"name": "p", "source": {"oci": "oci://r.example/p:v1", "allowTag": true, "sha256": "xyz"}}`:                            "must be 64 hex digits",
	} {
		a := Args{Namespace: "wasmsched-system"}
		if err := json.Unmarshal([]byte(`{"policies": [`+policy+`]}`), &a); err != nil {
			t.Fatal(err)
		}
		SetDefaults(&a)
		if errs := Validate(&a); len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), want) {
			t.Errorf("%s: %v, want an error with %q", policy, errs.ToAggregate(), want)
		}
	}
	testArgs(t, `{"name": "p", "source": {"oci": "oci://r.example:5000/p:v1", "allowTag": true, "resolveToken": "1"}}`)
}
