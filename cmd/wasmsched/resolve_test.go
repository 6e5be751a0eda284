package main

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
)

// TestResolve: `wasmsched resolve` sets a tagged policy's resolve token
// (and refuses a policy that names no tag, writing nothing); `status`
// shows the tag's resolution and the spec's revision as its digest; `resolve
// --wait` waits for the scheduler's resolution (written here as a
// scheduler would) and the revision serving.
func TestResolve(t *testing.T) {
	pc := policyEnv(t)
	tag := "oci://registry.example.com/policies/gpu:stable"
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": api.GroupVersion.String(), "kind": api.Kind,
		"metadata": map[string]any{"name": "gpu", "namespace": defaultNamespace},
		"spec":     map[string]any{"module": map[string]any{"oci": tag, "allowTag": true}}}}
	if _, err := pc.dyn.Resource(api.GVR).Namespace(defaultNamespace).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out := pc.ok("status"); !strings.Contains(out, "  spec "+api.SpecRevision(pc.get("gpu")).Key+": module of tag "+tag+", settings none\n  tag "+tag+" not resolved yet\n") {
		t.Errorf("status of an unresolved tag:\n%s", out)
	}
	out := pc.ok("resolve", "gpu")
	sp := pc.get("gpu")
	token := sp.Spec.Module.ResolveToken
	if token == "" || out != "schedulingpolicy/gpu: resolveToken "+token+"; the scheduler resolves "+tag+" again\n" {
		t.Fatalf("resolve: %q, token %q", out, token)
	}

	// What the scheduler writes once it has resolved the tag.
	digest, sum := "sha256:"+strings.Repeat("d", 64), strings.Repeat("5", 64)
	resolve := func(sp *api.SchedulingPolicy) {
		res := &api.TagResolution{Tag: tag, ResolveToken: sp.Spec.Module.ResolveToken, Digest: digest, SHA256: sum, ResolvedAt: metav1.Now(), Replica: "sched-0"}
		sp.Status.Resolved = res
		r := api.SpecRevision(sp)
		sp.Status.Serving = &r
		sp.Status.ObservedGeneration = sp.Generation
		sp.Status.Conditions = []metav1.Condition{{Type: api.ConditionReady, Status: metav1.ConditionTrue, Reason: api.ReasonServing, ObservedGeneration: sp.Generation, LastTransitionTime: metav1.Now()}}
	}
	pc.setStatus("gpu", resolve)
	key := api.SpecRevision(pc.get("gpu")).Key
	out = pc.ok("status")
	for _, want := range []string{"gpu   Enforce  " + key + "  " + key,
		"  spec, serving " + key + ": module 555555555555 (from tag " + tag + "), settings none\n",
		"  tag " + tag + " resolved to " + digest + " (module 555555555555) at ",
		" by sched-0; it loads until the tag or its resolve token changes (wasmsched resolve gpu resolves it again)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}

	// resolve --wait: done once the new token is resolved and serving.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for pc.get("gpu").Spec.Module.ResolveToken == token {
			time.Sleep(50 * time.Millisecond)
		}
		pc.setStatus("gpu", resolve)
	}()
	out = pc.ok("resolve", "gpu", "--wait", "1m")
	<-done
	if !strings.HasSuffix(out, "resolved "+tag+" to "+digest+" (module 555555555555)\nserving 555555555555\n") {
		t.Errorf("resolve --wait:\n%s", out)
	}

	// A policy naming a digest: nothing to resolve, nothing written.
	pinned := "oci://registry.example.com/policies/gpu@" + digest
	u.Object["metadata"] = map[string]any{"name": "pinned", "namespace": defaultNamespace}
	u.Object["spec"] = map[string]any{"module": map[string]any{"oci": pinned, "sha256": sum}}
	if _, err := pc.dyn.Resource(api.GVR).Namespace(defaultNamespace).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pc.fails([]string{"resolve", "pinned"}, "schedulingpolicy wasmsched-system/pinned names no OCI tag (its module: oci "+pinned+", a digest): nothing to resolve, nothing written")
	if pc.get("pinned").Generation != 1 {
		t.Error("a refused resolve wrote the SchedulingPolicy")
	}
	pc.fails([]string{"resolve", "nothing"}, "not found")
}
