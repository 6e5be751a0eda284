package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/internal/controlplane"
)

const digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestCRD installs the CRD in a real API server and checks what it accepts,
// defaults and refuses, with the messages an operator sees.
func TestCRD(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	controlplane.QuietLogs()
	ctx := context.Background()
	cp, err := controlplane.Start(ctx, controlplane.Options{TB: t})
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cp.RestConfig())
	if err := api.Install(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	if err := api.Install(ctx, dyn); err != nil { // an update is fine too
		t.Fatalf("second install: %v", err)
	}
	res := dyn.Resource(api.GVR).Namespace("default")
	if _, err := cp.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "wasmsched-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	create := func(name, spec string) (*api.SchedulingPolicy, error) {
		t.Helper()
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte("apiVersion: wasmsched.io/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: "+name+"}\nspec:\n"+spec), &obj); err != nil {
			t.Fatal(err)
		}
		u, err := res.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		return api.FromUnstructured(u)
	}

	sp, err := create("quota", "  module: {sha256: "+digest+"}\n  settings: {tenants: [{name: a, gpus: 4}], strict: true}\n  memoryLimit: 64Mi\n  timeout: 50ms\n")
	if err != nil {
		t.Fatal(err)
	}
	if sp.Spec.Mode != api.ModeEnforce || sp.Spec.FailurePolicy != api.FailurePolicyFail || sp.Spec.Weight != 1 {
		t.Errorf("defaults: mode %q failurePolicy %q weight %d, want Enforce Fail 1", sp.Spec.Mode, sp.Spec.FailurePolicy, sp.Spec.Weight)
	}
	var settings map[string]any
	if err := json.Unmarshal(sp.Spec.Settings, &settings); err != nil || settings["strict"] != true {
		t.Errorf("settings %s (%v): want the object as applied", sp.Spec.Settings, err)
	}
	if sp.Spec.MemoryLimit.Cmp(resource.MustParse("64Mi")) != 0 || sp.Spec.Timeout.Duration != 50*time.Millisecond {
		t.Errorf("limits: memory %v timeout %v", sp.Spec.MemoryLimit, sp.Spec.Timeout)
	}
	// Any JSON shape is a setting.
	if _, err := create("scalar", "  module: {sha256: "+digest+"}\n  settings: [1, \"two\"]\n"); err != nil {
		t.Errorf("array settings refused: %v", err)
	}
	// Context kinds: core, a custom resource, and a secret of another
	// group (only core Secrets are refused).
	ctxSpec := "  module: {sha256: " + digest + "}\n  context: [v1/namespaces, scheduling.x-k8s.io/v1alpha1/elasticquotas, example.com/v1/secrets]\n"
	if sp, err := create("reader", ctxSpec); err != nil {
		t.Errorf("context refused: %v", err)
	} else if len(sp.Spec.Context) != 3 || sp.Spec.Context[1] != "scheduling.x-k8s.io/v1alpha1/elasticquotas" {
		t.Errorf("context %q, want the list as applied", sp.Spec.Context)
	}
	if sp, err := create("tagged", "  module: {oci: 'oci://r.example:5000/p/gpu:v3', allowTag: true, resolveToken: '1'}\n"); err != nil {
		t.Errorf("a tag with allowTag refused: %v", err)
	} else if !sp.Spec.Module.AllowTag || sp.Spec.Module.SHA256 != "" || !sp.Spec.Module.IsTag() {
		t.Errorf("tagged module %+v", sp.Spec.Module)
	}
	if _, err := create("shadow", "  module: {sha256: "+digest+", url: 'http://localhost:8080/q.wasm'}\n  mode: Shadow\n  shadows: quota\n"); err != nil {
		t.Errorf("shadow refused: %v", err)
	}

	for _, tc := range []struct{ name, spec, want string }{
		{"bad-digest", "  module: {sha256: ABC}\n", "spec.module.sha256"},
		{"no-module", "  weight: 2\n", "spec.module: Required value"},
		{"both", "  module: {sha256: " + digest + ", url: 'https://x/y', file: /a}\n", "set at most one of url, file and oci"},
		{"url-oci", "  module: {sha256: " + digest + ", url: 'https://x/y', oci: 'oci://r.example/p@sha256:" + digest + "'}\n", "set at most one of url, file and oci"},
		{"oci-tag", "  module: {sha256: " + digest + ", oci: 'oci://r.example/p:v1'}\n", "oci names a tag, not a manifest digest: pin it"},
		{"oci-tag-nosum", "  module: {oci: 'oci://r.example/p:v1', allowTag: false}\n", "or opt in with allowTag: true"},
		{"no-sha256", "  module: {url: 'https://x/y'}\n", "sha256 is needed (only an oci tag with allowTag may leave it out"},
		{"token-pinned", "  module: {sha256: " + digest + ", oci: 'oci://r.example/p@sha256:" + digest + "', resolveToken: '1'}\n", "resolveToken is only meaningful with an oci tag"},
		{"allowtag-alone", "  module: {sha256: " + digest + ", allowTag: true}\n", "allowTag is only meaningful with oci"},
		{"oci-latest", "  module: {oci: 'oci://r.example/p', allowTag: true}\n", "spec.module.oci"},
		{"plain-http", "  module: {sha256: " + digest + ", url: 'http://example.com/p.wasm'}\n", "must be https://"},
		{"relative", "  module: {sha256: " + digest + ", file: a.wasm}\n", "must be an absolute path"},
		{"mode", "  module: {sha256: " + digest + "}\n  mode: Audit\n", `Unsupported value: "Audit"`},
		{"shadow-alone", "  module: {sha256: " + digest + "}\n  mode: Shadow\n", "a Shadow policy names the enforcing policy"},
		{"enforce-shadows", "  module: {sha256: " + digest + "}\n  shadows: quota\n", "only a Shadow policy sets shadows"},
		{"self", "  module: {sha256: " + digest + "}\n  mode: Shadow\n  shadows: self\n", "cannot shadow itself"},
		{"weight", "  module: {sha256: " + digest + "}\n  weight: 101\n", "spec.weight"},
		{"timeout", "  module: {sha256: " + digest + "}\n  timeout: 2m\n", "between 1ms and 1m"},
		{"memory", "  module: {sha256: " + digest + "}\n  memoryLimit: 1Mi\n", "between 8Mi and 4Gi"},
		{"memory-int", "  module: {sha256: " + digest + "}\n  memoryLimit: 1024\n", "between 8Mi and 4Gi"},
		{"instances", "  module: {sha256: " + digest + "}\n  maxInstances: 1000\n", "spec.maxInstances"},
		{"failure", "  module: {sha256: " + digest + "}\n  failurePolicy: Retry\n", `Unsupported value: "Retry"`},
		{"secrets", "  module: {sha256: " + digest + "}\n  context: [v1/namespaces, v1/secrets]\n", "secrets are never readable by policies"},
		{"secrets-v2", "  module: {sha256: " + digest + "}\n  context: [v2/secrets]\n", "secrets are never readable by policies"},
		{"kind-shape", "  module: {sha256: " + digest + "}\n  context: [namespaces]\n", "must be group/version/resource"},
		{"kind-case", "  module: {sha256: " + digest + "}\n  context: [Scheduling.x-k8s.io/v1alpha1/ElasticQuotas]\n", "must be group/version/resource"},
		{"kind-twice", "  module: {sha256: " + digest + "}\n  context: [v1/namespaces, v1/namespaces]\n", "Duplicate value"},
	} {
		_, err := create(tc.name, tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	// The manifests the docs show are accepted as shown.
	docs := docPolicies(t)
	if len(docs) == 0 {
		t.Error("no SchedulingPolicy manifest in the docs")
	}
	for where, doc := range docs {
		obj := map[string]any{}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		if _, err := dyn.Resource(api.GVR).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Errorf("%s: the API server refuses it: %v", where, err)
		}
	}
	long := strings.Repeat("p", 64)
	if _, err := create(long, "  module: {sha256: "+digest+"}\n"); err == nil || !strings.Contains(err.Error(), "at most 63 characters") {
		t.Errorf("64-character name: %v", err)
	}

	// Status is a subresource: a spec update does not change it, and the
	// scheduler's fields survive a round trip.
	sp.Status.ServingDigest = api.ShortDigest(digest)
	rev := api.RevisionOf(&sp.Spec)
	sp.Status.Serving = &rev
	sp.Status.Conditions = []metav1.Condition{{Type: api.ConditionReady, Status: metav1.ConditionTrue, Reason: api.ReasonServing, Message: "ok", LastTransitionTime: metav1.Now()}}
	u, err := api.ToUnstructured(sp)
	if err != nil {
		t.Fatal(err)
	}
	u, err = res.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	back, err := api.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	if back.Status.Serving == nil || back.Status.Serving.Key != rev.Key || back.Status.Serving.Verify() != nil {
		t.Errorf("status round trip: serving %+v", back.Status.Serving)
	}
}

func TestRevisionKey(t *testing.T) {
	spec := func(settings string) *api.SchedulingPolicySpec {
		return &api.SchedulingPolicySpec{Module: api.Module{SHA256: digest}, Settings: json.RawMessage(settings), Weight: 3}
	}
	a, b := api.RevisionOf(spec(`{"a": 1, "b": [1,2]}`)), api.RevisionOf(spec(`{"a":1,"b":[1,2]}`))
	if a.Key != b.Key {
		t.Errorf("whitespace changed the key: %s %s", a.Key, b.Key)
	}
	if c := api.RevisionOf(spec(`{"a":2,"b":[1,2]}`)); c.Key == a.Key {
		t.Error("settings did not change the key")
	}
	s := spec("")
	s.Weight, s.Order, s.FailurePolicy = 50, 3, api.FailurePolicyIgnore
	if api.RevisionOf(s).Key != api.RevisionOf(spec("")).Key {
		t.Error("weight, order or failure policy changed the key: they apply without a reload")
	}
	m := resource.MustParse("64Mi")
	s.MemoryLimit = &m
	r := api.RevisionOf(s)
	if r.Key == api.RevisionOf(spec("")).Key {
		t.Error("memory limit did not change the key")
	}
	// The allow-list is part of the revision, as a set; without one the
	// key is what it was before the field existed (keys in status stay
	// valid).
	if k := api.RevisionOf(spec(`{"a":1}`)).Key; k != "4ae1d4c577fb822f" {
		t.Errorf("key of a revision without context = %s, want 4ae1d4c577fb822f as before context existed", k)
	}
	c1, c2 := spec(""), spec("")
	c1.Context = []string{"v1/namespaces", "scheduling.k8s.io/v1/priorityclasses"}
	c2.Context = []string{"scheduling.k8s.io/v1/priorityclasses", "v1/namespaces"}
	if k1 := api.RevisionOf(c1).Key; k1 == api.RevisionOf(spec("")).Key || k1 != api.RevisionOf(c2).Key {
		t.Errorf("context: key %s, reordered %s, without %s: want a new key, independent of order", k1, api.RevisionOf(c2).Key, api.RevisionOf(spec("")).Key)
	}
	if rc := api.RevisionOf(c1); rc.Verify() != nil || !strings.Contains(rc.Short(), "revision") {
		t.Errorf("revision with context: verify %v, short %q", rc.Verify(), rc.Short())
	}
	r.Settings = json.RawMessage(`{"forged":true}`)
	if r.Verify() == nil {
		t.Error("a revision whose content changed still verifies")
	}
	// A tag: the opt-in and the resolve token are part of the revision
	// until it is resolved; resolved, it is the revision of a spec naming
	// the digest it resolved to.
	tag := &api.SchedulingPolicySpec{Module: api.Module{OCI: "oci://r.example:5000/p/gpu:v3", AllowTag: true}}
	tr := api.RevisionOf(tag)
	tag.Module.ResolveToken = "2"
	if tr2 := api.RevisionOf(tag); tr2.Key == tr.Key {
		t.Error("the resolve token did not change the key of a tag's revision")
	}
	if tr.Short() != "oci://r.example:5000/p/gpu:v3" {
		t.Errorf("short name of an unresolved tag %q", tr.Short())
	}
	manifest := "sha256:" + strings.Repeat("e", 64)
	res := &api.TagResolution{Tag: tag.Module.OCI, ResolveToken: "2", Digest: manifest, SHA256: digest}
	if !res.Matches(&tag.Module) {
		t.Fatal("a resolution of the tag and token does not match")
	}
	resolved := api.RevisionOf(tag).Resolved(res)
	pinned := api.RevisionOf(&api.SchedulingPolicySpec{Module: api.Module{SHA256: digest, OCI: "oci://r.example:5000/p/gpu@" + manifest}})
	if resolved.Key != pinned.Key || resolved.Verify() != nil || resolved.Module.OCI != pinned.Module.OCI || resolved.Module.ResolvedFrom != tag.Module.OCI || resolved.Module.AllowTag {
		t.Errorf("resolved %+v (key %s), want the pinned revision's key %s, its tag in resolvedFrom", resolved.Module, resolved.Key, pinned.Key)
	}
	for what, m := range map[string]api.Module{
		"another token": {OCI: tag.Module.OCI, AllowTag: true, ResolveToken: "3"},
		"another tag":   {OCI: "oci://r.example:5000/p/gpu:v4", AllowTag: true, ResolveToken: "2"},
		"another pin":   {OCI: tag.Module.OCI, AllowTag: true, ResolveToken: "2", SHA256: strings.Repeat("f", 64)},
		"a digest":      {OCI: "oci://r.example:5000/p/gpu@" + manifest, SHA256: digest},
	} {
		if res.Matches(&m) {
			t.Errorf("the resolution matches %s", what)
		}
	}
	if got := api.ModuleName(digest); got != "wasm-0123456789abcdef0123456789abcdef01234567" || !api.IsModuleName(got) {
		t.Errorf("ModuleName = %q", got)
	}
}

// docPolicies returns the SchedulingPolicy manifests shown in the docs.
func docPolicies(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	root := filepath.Join("..", "..", "..")
	for _, f := range []string{"docs/operators-guide.md", "docs/policy-configmaps.md", "docs/policy-oci.md", "README.md"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for i, block := range strings.Split(string(b), "```yaml")[1:] {
			block, _, _ = strings.Cut(block, "```")
			if strings.Contains(block, "kind: SchedulingPolicy") {
				out[fmt.Sprintf("%s block %d", f, i+1)] = []byte(block)
			}
		}
	}
	return out
}
