package e2e

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/lifecycle"
	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/host/trust"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// TestSchedulingPolicyFromOCITag: a SchedulingPolicy naming a tag is
// refused by the API server without allowTag. With it, the scheduler
// resolves the tag once, records the digest in status.resolved and serves
// that module (signed with the trusted key). The tag is then moved to
// other bytes: a settings change (a new revision) and a scheduler restart
// keep the pinned digest. A new resolveToken (what `wasmsched resolve` writes)
// resolves the tag again and the new module serves; moved once more to a
// module signed with an untrusted key, re-resolving is refused by the
// trust policy while the pinned module keeps serving.
func TestSchedulingPolicyFromOCITag(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Setenv("WASMSCHED_CACHE_DIR", t.TempDir())
	var lie atomic.Value
	lie.Store("")
	_, host, caFile, opts := startRegistry(t, &lie)

	c := startCluster(t, nil)
	c.installCRD()
	for _, n := range []string{"n1", "n2"} {
		c.node(n, nil)
	}
	trusted, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := trust.MarshalPublicKey(trusted.Public())
	if err != nil {
		t.Fatal(err)
	}
	keys := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "wasmsched-keys", Namespace: policyNamespace}, Data: map[string]string{"release.pub": string(pub)}}
	if _, err := c.client.CoreV1().ConfigMaps(policyNamespace).Create(context.Background(), keys, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tag := host + "/policies/nodepin:stable"
	// push --oci KEY to the tag, as the CLI does it: the artifact, then its
	// signature by digest.
	publish := func(module []byte, k crypto.Signer) name.Digest {
		t.Helper()
		d, err := source.PushOCI(context.Background(), tag, module, nil, opts)
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
	tagSpec := func(token string, nodes ...string) map[string]any {
		s := pinSpec("", nodes...)
		m := map[string]any{"oci": "oci://" + tag, "allowTag": true}
		if token != "" {
			m["resolveToken"] = token
		}
		s["module"] = m
		return s
	}
	// pinnedKey is the key of the revision a spec names once its tag is
	// resolved to d, holding module.
	pinnedKey := func(spec map[string]any, d name.Digest, module []byte) string {
		s := map[string]any{"settings": spec["settings"], "module": map[string]any{"oci": "oci://" + d.String(), "sha256": source.Digest(module)}}
		return revisionKey(t, s)
	}

	module1 := testwasm.Bytes(t, "examples/nodepin")
	d1 := publish(module1, trusted)

	// Without the opt-in the API server refuses the tag, saying how to
	// pin it or opt in.
	noOptIn := tagSpec("", "n1")
	delete(noOptIn["module"].(map[string]any), "allowTag")
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": api.GroupVersion.String(), "kind": api.Kind,
		"metadata": map[string]any{"name": "pin", "namespace": policyNamespace}, "spec": noOptIn}}
	_, err = c.dynamic().Resource(api.GVR).Namespace(policyNamespace).Create(context.Background(), u, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "oci names a tag, not a manifest digest") || !strings.Contains(err.Error(), "allowTag: true") {
		t.Fatalf("a tag without allowTag: %v, want the API server to refuse it naming allowTag", err)
	}

	// With it: resolved once, recorded, served.
	first := tagSpec("", "n1")
	c.applyPolicy("pin", first)
	trusting := func(cfg map[string]any) {
		a := pluginArgs(cfg)
		a["registryCA"] = caFile
		a["trust"] = map[string]any{"keys": []any{map[string]any{"name": "release", "configMap": "wasmsched-keys", "key": "release.pub"}}}
	}
	restartScheduler(t, c, nil, selecting("2s", "pin"), trusting)
	firstKey := pinnedKey(first, d1, module1)
	sp := c.waitPolicy("pin", "serving the tag resolved", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return servingKey(firstKey, metav1.ConditionTrue)(sp) && sp.Status.Resolved != nil
	})
	res1 := *sp.Status.Resolved
	if res1.Tag != "oci://"+tag || res1.Digest != d1.DigestStr() || res1.SHA256 != source.Digest(module1) {
		t.Fatalf("status.resolved %+v, want %s resolved to %s (module %s)", res1, tag, d1.DigestStr(), source.Digest(module1))
	}
	if m := sp.Status.Serving.Module; m.OCI != "oci://"+d1.String() || m.SHA256 != source.Digest(module1) || m.ResolvedFrom != "oci://"+tag {
		t.Errorf("status.serving.module %+v, want the pinned digest and the tag it came from", m)
	}
	waitFor(t, "a PolicyTagResolved Event", 30*time.Second, func() bool {
		for _, n := range c.policyEvents("pin", "PolicyTagResolved") {
			if strings.Contains(n, "tag oci://"+tag+" resolved to "+d1.DigestStr()) {
				return true
			}
		}
		return false
	})
	c.pod("a")
	if n := c.waitBound("a", 30*time.Second); n != "n1" {
		t.Fatalf("pod a on %s, want n1", n)
	}

	// The tag moves to other bytes (the same code with a custom section,
	// signed with the trusted key). A settings change is a new revision of
	// the same module: the pinned digest, not the tag.
	module2 := append(append([]byte(nil), module1...), 0x00, 0x05, 0x04, 't', 'a', 'g', '2')
	d2 := publish(module2, trusted)
	second := tagSpec("", "n2")
	c.applyPolicy("pin", second)
	secondKey := pinnedKey(second, d1, module1)
	c.waitPolicy("pin", "serving the new settings with the pinned digest", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return servingKey(secondKey, metav1.ConditionTrue)(sp) && sp.Status.LastGood != nil && sp.Status.LastGood.Key == secondKey
	})
	c.pod("b")
	if n := c.waitBound("b", 30*time.Second); n != "n2" {
		t.Fatalf("pod b on %s, want n2", n)
	}

	// A restart resolves nothing: the digest in status loads.
	before := c.getPolicy("pin").Status.LoadedAt
	restartScheduler(t, c, nil, selecting("2s", "pin"), trusting)
	sp = c.waitPolicy("pin", "serving the pinned digest after a restart", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return servingKey(secondKey, metav1.ConditionTrue)(sp) && sp.Status.LoadedAt != nil && before != nil && sp.Status.LoadedAt.After(before.Time)
	})
	if r := sp.Status.Resolved; r == nil || r.Digest != d1.DigestStr() || !r.ResolvedAt.Equal(&res1.ResolvedAt) {
		t.Errorf("status.resolved after the restart %+v, want the first resolution %+v", r, res1)
	}
	if sp.Status.Serving.Module.SHA256 != source.Digest(module1) {
		t.Errorf("serving module %s after the restart, want the pinned %s", sp.Status.Serving.Module.SHA256, source.Digest(module1))
	}
	c.pod("c")
	if n := c.waitBound("c", 30*time.Second); n != "n2" {
		t.Fatalf("pod c on %s, want n2", n)
	}

	// A new resolve token (wasmsched resolve) resolves the tag again.
	third := tagSpec("2", "n2")
	c.applyPolicy("pin", third)
	thirdKey := pinnedKey(third, d2, module2)
	sp = c.waitPolicy("pin", "serving the tag resolved again", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return servingKey(thirdKey, metav1.ConditionTrue)(sp)
	})
	if r := sp.Status.Resolved; r == nil || r.Digest != d2.DigestStr() || r.SHA256 != source.Digest(module2) || r.ResolveToken != "2" {
		t.Errorf("status.resolved %+v, want the tag's new digest %s for token 2", r, d2.DigestStr())
	}

	// Moved to a module signed with another key: resolving again is
	// refused by the trust policy, the pinned module keeps serving.
	module3 := append(append([]byte(nil), module1...), 0x00, 0x05, 0x04, 't', 'a', 'g', '3')
	d3 := publish(module3, other)
	c.applyPolicy("pin", tagSpec("3", "n2"))
	sp = c.waitPolicy("pin", "refusing the re-resolved module signed with another key", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return condition(sp, api.ConditionRejected).Reason == api.ReasonUntrusted && sp.Status.ObservedGeneration == sp.Generation
	})
	if r := sp.Status.Resolved; r == nil || r.Digest != d3.DigestStr() || r.ResolveToken != "3" {
		t.Errorf("status.resolved %+v, want %s for token 3", r, d3.DigestStr())
	}
	if msg := condition(sp, api.ConditionRejected).Message; !strings.Contains(msg, "untrusted: no signature of module sha256:"+source.Digest(module3)) {
		t.Errorf("Rejected message %q, want the untrusted module named", msg)
	}
	if sp.Status.Serving == nil || sp.Status.Serving.Key != thirdKey {
		t.Errorf("serving %+v, want the revision pinned before (%s)", sp.Status.Serving, thirdKey)
	}
	c.pod("d")
	if n := c.waitBound("d", 30*time.Second); n != "n2" {
		t.Fatalf("pod d on %s, want n2", n)
	}
}

// TestStaticPolicyFromOCITag: a static policy naming a tag with allowTag
// serves the module the tag named when the scheduler first resolved it,
// recorded in wasmsched-policy-state. The tag moved, a restart serves the
// same module; a restart with a new resolveToken in the arguments serves
// the tag's new module.
func TestStaticPolicyFromOCITag(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Setenv("WASMSCHED_CACHE_DIR", t.TempDir())
	var lie atomic.Value
	lie.Store("")
	_, host, caFile, opts := startRegistry(t, &lie)
	c := startCluster(t, nil)
	c.namespace(policyNamespace)
	for _, n := range []string{"n1", "n2"} {
		c.node(n, nil)
	}
	tag := host + "/policies/static:stable"
	module1 := testwasm.Bytes(t, "examples/nodepin")
	d1, err := source.PushOCI(context.Background(), tag, module1, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	static := func(token string) func(cfg map[string]any) {
		return func(cfg map[string]any) {
			src := map[string]any{"oci": "oci://" + tag, "allowTag": true}
			if token != "" {
				src["resolveToken"] = token
			}
			a := pluginArgs(cfg)
			a["registryCA"] = caFile
			a["policies"] = []any{map[string]any{"name": "pin", "source": src, "settings": map[string]any{"nodes": []any{"n2"}}}}
		}
	}
	pin := []policy{{Name: "pin", Package: "examples/nodepin"}}
	restartScheduler(t, c, pin, static(""))
	c.waitActive("pin", source.Digest(module1), 60*time.Second)
	st := c.waitStatic("pin", "recording the tag's resolution", func(st api.SchedulingPolicyStatus) bool { return st.Resolved != nil })
	res1 := *st.Resolved
	if res1.Tag != "oci://"+tag || res1.Digest != d1.DigestStr() || res1.SHA256 != source.Digest(module1) {
		t.Fatalf("state.resolved %+v, want %s resolved to %s", res1, tag, d1.DigestStr())
	}
	c.pod("a")
	if n := c.waitBound("a", 30*time.Second); n != "n2" {
		t.Fatalf("pod a on %s, want n2", n)
	}

	// The tag moves; a restart serves the digest recorded.
	module2 := append(append([]byte(nil), module1...), 0x00, 0x05, 0x04, 's', 't', 'a', '2')
	d2, err := source.PushOCI(context.Background(), tag, module2, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	restarted := func(token, digest string) {
		t.Helper()
		var before time.Time
		c.waitStatus("pin", time.Second, func(p lifecycle.SlotStatus) bool { before = p.LoadedAt; return true })
		restartScheduler(t, c, pin, static(token))
		if last, ok := c.waitStatus("pin", 60*time.Second, func(p lifecycle.SlotStatus) bool {
			return p.Digest == digest && p.LoadedAt.After(before)
		}); !ok {
			t.Fatalf("after the restart, policy pin does not serve %s; status: %s", digest, last)
		}
	}
	restarted("", source.Digest(module1))
	if st := c.staticState("pin"); st.Resolved == nil || st.Resolved.Digest != d1.DigestStr() || !st.Resolved.ResolvedAt.Equal(&res1.ResolvedAt) {
		t.Errorf("state.resolved after the restart %+v, want the first resolution", st.Resolved)
	}
	c.pod("b")
	if n := c.waitBound("b", 30*time.Second); n != "n2" {
		t.Fatalf("pod b on %s, want n2", n)
	}

	// A new resolve token: resolved again at the restart.
	restarted("2", source.Digest(module2))
	if st := c.staticState("pin"); st.Resolved == nil || st.Resolved.Digest != d2.DigestStr() || st.Resolved.ResolveToken != "2" {
		t.Errorf("state.resolved %+v, want %s for token 2", st.Resolved, d2.DigestStr())
	}
}
