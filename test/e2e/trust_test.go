package e2e

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/host/trust"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// TestTrustPolicy: the scheduler trusts key a (a ConfigMap in its
// namespace). A module signed with a and pushed to a registry behind TLS
// with authentication serves; one signed with key b is refused (Rejected
// Untrusted, an Event PolicyUntrusted) while the last good serves. Listing
// both keys (a rotation) lets it serve. Restarted with the registry gone,
// the scheduler serves it from its module cache, its signatures checked
// from there; restarted trusting a alone (b rotated out), it serves
// nothing and pods wait with the reason.
func TestTrustPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Setenv("WASMSCHED_CACHE_DIR", t.TempDir())
	var lie atomic.Value
	srv, host, caFile, opts := startRegistry(t, &lie)
	opts.Keychain = mustKeychain(t, "puller", "s3cret", host)

	c := startCluster(t, nil)
	c.installCRD()
	for _, n := range []string{"n1", "n2"} {
		c.node(n, nil)
	}
	keyA, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, keyB, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keys := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "wasmsched-keys", Namespace: policyNamespace}, Data: map[string]string{}}
	for n, k := range map[string]crypto.Signer{"a.pub": keyA, "b.pub": keyB} {
		b, err := trust.MarshalPublicKey(k.Public())
		if err != nil {
			t.Fatal(err)
		}
		keys.Data[n] = string(b)
	}
	if _, err := c.client.CoreV1().ConfigMaps(policyNamespace).Create(context.Background(), keys, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pull credentials for the private repository.
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: policyNamespace}, Type: v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths":{"` + host + `":{"username":"puller","password":"s3cret"}}}`)}}
	if _, err := c.client.CoreV1().Secrets(policyNamespace).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// push --oci and sign --oci, as the CLI does them.
	publish := func(module []byte, tag string, k crypto.Signer) name.Digest {
		t.Helper()
		d, err := source.PushOCI(context.Background(), host+"/private/nodepin:"+tag, module, nil, opts)
		if err != nil {
			t.Fatal(err)
		}
		payload := trust.SimpleSigningPayload(d.Context().Name(), d.DigestStr())
		sig, err := trust.Sign(k, payload)
		if err != nil {
			t.Fatal(err)
		}
		if err := source.PushOCISignature(context.Background(), d, payload, sig, opts); err != nil {
			t.Fatal(err)
		}
		return d
	}
	spec := func(module []byte, d name.Digest, node string) map[string]any {
		s := pinSpec(source.Digest(module), node)
		m := s["module"].(map[string]any)
		m["oci"], m["pullSecret"] = "oci://"+d.String(), "regcred"
		return s
	}
	trusting := func(names ...string) func(cfg map[string]any) {
		return func(cfg map[string]any) {
			var ks []any
			for _, n := range names {
				ks = append(ks, map[string]any{"name": n, "configMap": "wasmsched-keys", "key": n + ".pub"})
			}
			a := pluginArgs(cfg)
			a["registryCA"] = caFile
			a["trust"] = map[string]any{"keys": ks}
		}
	}

	module := testwasm.Bytes(t, "examples/nodepin")
	first := spec(module, publish(module, "v1", keyA), "n1")
	c.applyPolicy("pin", first)
	restartScheduler(t, c, nil, selecting("2s", "pin"), trusting("a"))
	firstKey := revisionKey(t, first)
	c.waitPolicy("pin", "serving the module signed with a, proven", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return servingKey(firstKey, metav1.ConditionTrue)(sp) && sp.Status.LastGood != nil && sp.Status.LastGood.Key == firstKey
	})
	c.pod("a")
	if n := c.waitBound("a", 30*time.Second); n != "n1" {
		t.Fatalf("pod a on %s, want n1", n)
	}

	// The same code with a custom section, signed with b.
	module2 := append(append([]byte(nil), module...), 0x00, 0x05, 0x04, 's', 'i', 'g', 'b')
	d2 := publish(module2, "v2", keyB)
	second := spec(module2, d2, "n2")
	c.applyPolicy("pin", second)
	sp := c.waitPolicy("pin", "refusing the module signed with b", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return condition(sp, api.ConditionRejected).Reason == api.ReasonUntrusted && sp.Status.ObservedGeneration == sp.Generation
	})
	msg := condition(sp, api.ConditionRejected).Message
	for _, want := range []string{"untrusted: no signature of module sha256:" + source.Digest(module2) + " verifies with key a (",
		source.OCISignatureTag(d2).String() + " layer 0: does not verify over its payload with any trusted key"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Rejected message %q does not say %q", msg, want)
		}
	}
	if sp.Status.Serving == nil || sp.Status.Serving.Key != firstKey {
		t.Errorf("the last good revision does not serve: %+v", sp.Status.Serving)
	}
	waitFor(t, "a PolicyUntrusted Event", 30*time.Second, func() bool {
		for _, e := range c.policyEvents("pin", "PolicyUntrusted") {
			if strings.Contains(e, "untrusted: no signature of module sha256:"+source.Digest(module2)) {
				return true
			}
		}
		return false
	})
	c.pod("b")
	if n := c.waitBound("b", 30*time.Second); n != "n1" {
		t.Errorf("pod b on %s, want n1 (the last good revision)", n)
	}

	// A rotation: both keys trusted at once; the module signed with b
	// serves.
	c.sched.Stop()
	restartScheduler(t, c, nil, selecting("2s", "pin"), trusting("a", "b"))
	secondKey := revisionKey(t, second)
	c.waitPolicy("pin", "serving the module signed with b, proven", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return servingKey(secondKey, metav1.ConditionTrue)(sp) && sp.Status.LastGood != nil && sp.Status.LastGood.Key == secondKey
	})
	c.pod("c")
	if n := c.waitBound("c", 30*time.Second); n != "n2" {
		t.Errorf("pod c on %s, want n2", n)
	}

	// The registry disappears: the module and its signatures come from
	// the module cache.
	srv.Close()
	c.sched.Stop()
	restartScheduler(t, c, nil, selecting("2s", "pin"), trusting("a", "b"))
	c.waitPolicy("pin", "serving from the module cache", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return servingKey(secondKey, metav1.ConditionTrue)(sp)
	})
	c.pod("d")
	if n := c.waitBound("d", 30*time.Second); n != "n2" {
		t.Errorf("pod d on %s, want n2", n)
	}

	// b rotated out: the last good revision is refused at the restart, and
	// nothing serves.
	c.sched.Stop()
	restartScheduler(t, c, nil, selecting("2s", "pin"), trusting("a"))
	c.waitPolicy("pin", "refusing the last good revision signed with b", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return condition(sp, api.ConditionRejected).Reason == api.ReasonUntrusted && sp.Status.Serving == nil
	})
	c.pod("e")
	if msg := c.waitUnschedulable("e", 30*time.Second); !strings.Contains(msg, "untrusted: no signature of module sha256:"+source.Digest(module2)) {
		t.Errorf("pod e waits with %q, want the trust policy's reason", msg)
	}
}

// TestTrustPolicyStatic: static policies go through the same check. The
// trusted key is in a Secret. A module in a private registry is refused
// while its pull secret is missing; pulled with it, signed with the key,
// it serves; an unsigned module file is
// refused and pods wait with the reason; the same file with a detached
// signature beside it serves.
func TestTrustPolicyStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Setenv("WASMSCHED_CACHE_DIR", t.TempDir())
	var lie atomic.Value
	_, host, caFile, opts := startRegistry(t, &lie)
	opts.Keychain = mustKeychain(t, "puller", "s3cret", host)
	c := startCluster(t, nil)
	c.namespace(policyNamespace)
	for _, n := range []string{"n1", "n2"} {
		c.node(n, nil)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := trust.MarshalPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*v1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "release-key", Namespace: policyNamespace}, Data: map[string][]byte{"cosign.pub": pub}},
		{ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: policyNamespace}, Type: v1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths":{"` + host + `":{"username":"puller","password":"s3cret"}}}`)}},
	} {
		if _, err := c.client.CoreV1().Secrets(policyNamespace).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	module := testwasm.Bytes(t, "examples/nodepin")
	d, err := source.PushOCI(context.Background(), host+"/private/static:v1", module, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload := trust.SimpleSigningPayload(d.Context().Name(), d.DigestStr())
	sig, err := trust.Sign(key, payload)
	if err != nil {
		t.Fatal(err)
	}
	if err := source.PushOCISignature(context.Background(), d, payload, sig, opts); err != nil {
		t.Fatal(err)
	}
	static := func(src map[string]any) func(cfg map[string]any) {
		return func(cfg map[string]any) {
			a := pluginArgs(cfg)
			a["registryCA"] = caFile
			a["trust"] = map[string]any{"keys": []any{map[string]any{"name": "release", "secret": "release-key"}}}
			a["policies"] = []any{map[string]any{"name": "pin", "source": src, "settings": map[string]any{"nodes": []any{"n2"}}}}
		}
	}
	// A pull secret that does not exist: the fetch fails naming it, and
	// pods wait with the reason.
	restartScheduler(t, c, []policy{{Name: "pin", Package: "examples/nodepin"}},
		static(map[string]any{"oci": "oci://" + d.String(), "sha256": source.Digest(module), "pullSecret": "nope"}))
	c.pod("a")
	if msg := c.waitUnschedulable("a", 60*time.Second); !strings.Contains(msg, `pull secret wasmsched-system/nope: secrets "nope" not found`) {
		t.Errorf("pod a waits with %q, want the missing pull secret", msg)
	}
	c.sched.Stop()
	restartScheduler(t, c, []policy{{Name: "pin", Package: "examples/nodepin"}},
		static(map[string]any{"oci": "oci://" + d.String(), "sha256": source.Digest(module), "pullSecret": "regcred"}))
	if n := c.waitBound("a", 60*time.Second); n != "n2" {
		t.Fatalf("pod a on %s, want n2", n)
	}

	// A module file, unsigned.
	file := testwasm.Path(t, "examples/nodepin")
	c.sched.Stop()
	restartScheduler(t, c, []policy{{Name: "pin", Package: "examples/nodepin"}}, static(map[string]any{"file": file}))
	c.pod("b")
	if msg := c.waitUnschedulable("b", 60*time.Second); !strings.Contains(msg, "untrusted: module sha256:"+source.Digest(module)+" is not signed") {
		t.Errorf("pod b waits with %q, want the trust policy's reason", msg)
	}

	// The file with its signature beside it (wasmsched sign's P.wasm.sig).
	signed := t.TempDir() + "/pin.wasm"
	blob, err := trust.Sign(key, module)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(signed, module, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(signed+".sig", []byte(base64.StdEncoding.EncodeToString(blob)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.sched.Stop()
	restartScheduler(t, c, []policy{{Name: "pin", Package: "examples/nodepin"}}, static(map[string]any{"file": signed}))
	if n := c.waitBound("b", 60*time.Second); n != "n2" {
		t.Errorf("pod b on %s, want n2", n)
	}
}
