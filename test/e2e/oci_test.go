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

	"github.com/google/go-containerregistry/pkg/registry"
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
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := lie.Load().(string); p != "" && r.URL.Path == p {
			_, _ = w.Write([]byte("\x00asm\x01\x00\x00\x00 other bytes"))
			return
		}
		reg.ServeHTTP(w, r)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "registry-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "https://")
	opts := source.OCIOptions{Transport: srv.Client().Transport}

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
	withCA := func(cfg map[string]any) {
		prof := cfg["profiles"].([]any)[0].(map[string]any)
		prof["pluginConfig"].([]any)[0].(map[string]any)["args"].(map[string]any)["registryCA"] = caFile
	}
	restartScheduler(t, c, nil, selecting("2s", "pin"), withCA)
	firstKey := revisionKey(t, first)
	c.waitPolicy("pin", "proven", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return servingKey(firstKey, metav1.ConditionTrue)(sp) && sp.Status.LastGood != nil && sp.Status.LastGood.Key == firstKey
	})
	c.pod("a")
	if n := c.waitBound("a", 30*time.Second); n != "n1" {
		t.Fatalf("pod a on %s, want n1", n)
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
	if n := c.waitBound("b", 30*time.Second); n != "n1" {
		t.Errorf("pod b on %s, want n1 (the last good revision)", n)
	}

	// The registry disappears; a restarted scheduler serves the last good
	// revision from its module cache.
	srv.Close()
	restartScheduler(t, c, nil, selecting("2s", "pin"), withCA)
	c.waitPolicy("pin", "serving the last good revision from the cache", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return servingKey(firstKey, metav1.ConditionFalse)(sp) && condition(sp, api.ConditionReady).Reason == api.ReasonServingLastGood
	})
	c.pod("c")
	if n := c.waitBound("c", 30*time.Second); n != "n1" {
		t.Errorf("pod c on %s, want n1", n)
	}
}
