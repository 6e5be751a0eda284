package e2e

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// TestSchedulingPolicyFromOCI: a SchedulingPolicy names a module pushed to
// a registry (in process, behind TLS, trusted through registryCA); it
// serves. A revision whose blob the registry serves with other bytes is
// refused while the last good serves. Restarted with the registry gone,
// the scheduler serves the last good revision from its module cache.
func TestSchedulingPolicyFromOCI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Setenv("WASMSCHED_CACHE_DIR", t.TempDir())
	var lie atomic.Value // the blob path the registry lies about
	lie.Store("")
	srv, host, caFile, opts := startRegistry(t, &lie)

	c := startCluster(t, nil)
	c.installCRD()
	for _, n := range []string{"n1", "n2"} {
		c.node(n, nil)
	}
	module := testwasm.Bytes(t, "examples/nodepin")
	ref, err := source.PushOCI(context.Background(), host+"/policies/nodepin:v1", module, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	ociSpec := func(module []byte, ref, node string) map[string]any {
		s := pinSpec(source.Digest(module), node)
		s["module"].(map[string]any)["oci"] = "oci://" + ref
		return s
	}
	first := ociSpec(module, ref.String(), "n1")
	c.applyPolicy("pin", first)
	withCA := func(cfg map[string]any) { pluginArgs(cfg)["registryCA"] = caFile }
	restartScheduler(t, c, nil, selecting("2s", "pin"), withCA)
	firstKey := revisionKey(t, first)
	c.waitPolicy("pin", "proven", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return servingKey(firstKey, metav1.ConditionTrue)(sp) && sp.Status.LastGood != nil && sp.Status.LastGood.Key == firstKey
	})
	c.pod("a")
	if n := c.waitBound("a", 30*time.Second); n != "n1" {
		t.Fatalf("pod a on %s, want n1", n)
	}

	// A module in a private repository: refused without credentials, with a
	// pull secret that does not exist, with a wrong password; served with
	// the right one.
	private := append(append([]byte(nil), module...), 0x00, 0x05, 0x04, 'p', 'r', 'i', 'v')
	popts := opts
	popts.Keychain = mustKeychain(t, "puller", "s3cret", host)
	pref, err := source.PushOCI(context.Background(), host+"/private/nodepin:v1", private, nil, popts)
	if err != nil {
		t.Fatal(err)
	}
	privSpec := ociSpec(private, pref.String(), "n2")
	refused := func(what, want string, spec map[string]any) {
		t.Helper()
		c.applyPolicy("pin", spec)
		c.waitPolicy("pin", what, 60*time.Second, func(sp *api.SchedulingPolicy) bool {
			r := condition(sp, api.ConditionRejected)
			return r.Reason == api.ReasonFetch && strings.Contains(r.Message, want) && sp.Status.ObservedGeneration == sp.Generation
		})
	}
	refused("refusing an anonymous pull", "401", privSpec)
	withSecret := func(node string) map[string]any {
		s := ociSpec(private, pref.String(), node)
		s["module"].(map[string]any)["pullSecret"] = "regcred"
		return s
	}
	refused("refusing a missing pull secret", `pull secret wasmsched-system/regcred: secrets "regcred" not found`, withSecret("n2"))
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: policyNamespace}, Type: v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths":{"` + host + `":{"username":"puller","password":"wrong"}}}`)}}
	if _, err := c.client.CoreV1().Secrets(policyNamespace).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	refused("refusing a wrong password", "401", withSecret("n1,n2"))
	secret.Data[v1.DockerConfigJsonKey] = []byte(`{"auths":{"` + host + `":{"auth":"cHVsbGVyOnMzY3JldA=="}}}`) // puller:s3cret
	if _, err := c.client.CoreV1().Secrets(policyNamespace).Update(context.Background(), secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	good := withSecret("n2")
	c.applyPolicy("pin", good)
	goodKey := revisionKey(t, good)
	c.waitPolicy("pin", "serving the private module, proven", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return servingKey(goodKey, metav1.ConditionTrue)(sp) && sp.Status.LastGood != nil && sp.Status.LastGood.Key == goodKey
	})
	c.pod("d")
	if n := c.waitBound("d", 30*time.Second); n != "n2" {
		t.Fatalf("pod d on %s, want n2", n)
	}

	// Another module (the same code with a custom section), whose blob the
	// registry serves with other bytes.
	module2 := append(append([]byte(nil), module...), 0x00, 0x05, 0x04, 'o', 'c', 'i', '2')
	ref2, err := source.PushOCI(context.Background(), host+"/policies/nodepin:v2", module2, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	lie.Store("/v2/policies/nodepin/blobs/sha256:" + source.Digest(module2))
	c.applyPolicy("pin", ociSpec(module2, ref2.String(), "n2"))
	sp := c.waitPolicy("pin", "refusing the lying registry", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return condition(sp, api.ConditionRejected).Reason == api.ReasonFetch && sp.Status.ObservedGeneration == sp.Generation
	})
	if m := condition(sp, api.ConditionRejected).Message; !strings.Contains(m, "oci "+ref2.String()) || !strings.Contains(m, "error verifying sha256 checksum") {
		t.Errorf("Rejected message %q, want the reference and the checksum failure", m)
	}
	c.pod("b")
	if n := c.waitBound("b", 30*time.Second); n != "n2" {
		t.Errorf("pod b on %s, want n2 (the last good revision)", n)
	}

	// The registry disappears; a restarted scheduler serves the last good
	// revision from its module cache.
	srv.Close()
	restartScheduler(t, c, nil, selecting("2s", "pin"), withCA)
	c.waitPolicy("pin", "serving the last good revision from the cache", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return servingKey(goodKey, metav1.ConditionFalse)(sp) && condition(sp, api.ConditionReady).Reason == api.ReasonServingLastGood
	})
	c.pod("c")
	if n := c.waitBound("c", 30*time.Second); n != "n2" {
		t.Errorf("pod c on %s, want n2", n)
	}
}

// startRegistry starts an OCI registry (go-containerregistry's, in
// process) behind TLS; repositories under private/ need basic auth
// (puller, s3cret). When lie holds a path, that blob is served as other
// bytes. It returns the server, its host, a file with its CA certificate
// (for the plugin argument registryCA) and client options trusting it.
func startRegistry(t *testing.T, lie *atomic.Value) (*httptest.Server, string, string, source.OCIOptions) {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Repositories under private/ need basic auth (and so does the
		// ping, so that clients learn the scheme).
		if r.URL.Path == "/v2/" || strings.HasPrefix(r.URL.Path, "/v2/private/") {
			if u, p, ok := r.BasicAuth(); !ok || u != "puller" || p != "s3cret" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		if p, _ := lie.Load().(string); p != "" && r.URL.Path == p {
			_, _ = w.Write([]byte("\x00asm\x01\x00\x00\x00 other bytes"))
			return
		}
		reg.ServeHTTP(w, r)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "registry-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, strings.TrimPrefix(srv.URL, "https://"), caFile, source.OCIOptions{Transport: srv.Client().Transport}
}

// pluginArgs are the WasmPolicy arguments of a scheduler configuration's
// first profile.
func pluginArgs(cfg map[string]any) map[string]any {
	prof := cfg["profiles"].([]any)[0].(map[string]any)
	return prof["pluginConfig"].([]any)[0].(map[string]any)["args"].(map[string]any)
}

func mustKeychain(t *testing.T, user, password, host string) authn.Keychain {
	t.Helper()
	k, err := source.DockerConfigKeychain([]byte(`{"auths":{"` + host + `":{"username":"` + user + `","password":"` + password + `"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return k
}
