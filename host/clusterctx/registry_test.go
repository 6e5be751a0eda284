//go:build !nocontrolplane

// Left out with -tags nocontrolplane: make test runs this package under the
// race detector without the tests that start a control plane, which would
// link the API server, compiled with -race on 2 cores at a cold cache, for
// them alone; they run without -race (Makefile, CP_PKGS).

package clusterctx_test

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/clusterctx"
	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/crds"
)

func newRegistry(t *testing.T, cfg *rest.Config) *clusterctx.Registry {
	t.Helper()
	typed := informers.NewSharedInformerFactory(kubernetes.NewForConfigOrDie(cfg), 0)
	r := clusterctx.NewRegistry(typed, dynamic.NewForConfigOrDie(cfg))
	t.Cleanup(r.Close)
	return r
}

func objects(t *testing.T, s *clusterctx.Store) []*abiv1.ContextObject {
	t.Helper()
	out, _, _ := s.AppendSince(nil, 0, 0)
	var m abiv1.NodeSync
	if err := m.UnmarshalVT(out); err != nil {
		t.Fatal(err)
	}
	return m.Objects
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRegistry runs the registry against a real API server with the
// ElasticQuota CRD installed and RBAC enforced: built-in kinds through the
// typed factory, the custom resource through a dynamic informer, live
// updates, and the errors an operator meets (CRD missing, RBAC, Secrets).
func TestRegistry(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	controlplane.QuietLogs()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{TB: t, Authorization: "Node,RBAC"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := cp.RestConfig()
	if err := crds.Install(ctx, cfg, crds.ElasticQuota()); err != nil {
		t.Fatal(err)
	}
	eqs := dynamic.NewForConfigOrDie(cfg).Resource(clusterctx.KindElasticQuota.GVR()).Namespace("default")
	eq := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
		"metadata": map[string]any{"name": "team-a", "namespace": "default"},
		"spec":     map[string]any{"min": map[string]any{"cpu": "2"}, "max": map[string]any{"cpu": "4", "nvidia.com/gpu": 2}},
	}}
	created, err := eqs.Create(ctx, eq, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	r := newRegistry(t, cfg)
	ns, err := r.Store(ctx, clusterctx.KindNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if ns.Len() < 3 { // default, kube-system, kube-public, kube-node-lease
		t.Fatalf("%d namespaces", ns.Len())
	}
	quotas, err := r.Store(ctx, clusterctx.KindElasticQuota)
	if err != nil {
		t.Fatal(err)
	}
	got := objects(t, quotas)
	if len(got) != 1 || got[0].Name != "team-a" || got[0].Namespace != "default" || !strings.Contains(string(got[0].Json), `"max":{"cpu":"4","nvidia.com/gpu":2}`) {
		t.Fatalf("quotas: %v", got)
	}
	if again, err := r.Store(ctx, clusterctx.KindElasticQuota); err != nil || again != quotas {
		t.Fatalf("second Store: %v, same store %v", err, again == quotas)
	}

	// A live change reaches the store as one change.
	pos := quotas.Seq()
	if err := unstructured.SetNestedField(created.Object, "6", "spec", "max", "cpu"); err != nil {
		t.Fatal(err)
	}
	if _, err := eqs.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the update", func() bool { return quotas.Seq() != pos })
	out, _, n := quotas.AppendSince(nil, 0, pos)
	if n != 1 || !strings.Contains(string(out), `"cpu":"6"`) {
		t.Fatalf("update: %d entries %q", n, out)
	}

	// Tenant usage from the pod informer.
	u := r.Usage()
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: v1.PodSpec{NodeName: "n1",
		Containers: []v1.Container{{Name: "c", Image: "x", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("300m")}}}}}}
	if _, err := cp.Client().CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod's usage", func() bool { return u.Get("", "default").GetMilliCpu() == 300 })

	// A CRD that is not installed.
	nrt := clusterctx.Kind{Group: "topology.node.k8s.io", Version: "v1alpha2", Resource: "noderesourcetopologies"}
	short, cancelShort := context.WithTimeout(ctx, 15*time.Second)
	defer cancelShort()
	if _, err := r.Store(short, nrt); err == nil || !strings.Contains(err.Error(), "CustomResourceDefinition installed") || !strings.Contains(err.Error(), nrt.String()) {
		t.Fatalf("missing CRD: %v", err)
	}
	// Secrets, whatever the credentials.
	if _, err := r.Store(ctx, clusterctx.Kind{Version: "v1", Resource: "secrets"}); err == nil || !strings.Contains(err.Error(), "never readable") {
		t.Fatalf("secrets: %v", err)
	}
	// Credentials without a rule for the kind.
	weak := rest.CopyConfig(cfg)
	weak.Impersonate = rest.ImpersonationConfig{UserName: "nobody"}
	rw := newRegistry(t, weak)
	short2, cancelShort2 := context.WithTimeout(ctx, 15*time.Second)
	defer cancelShort2()
	if _, err := rw.Store(short2, clusterctx.KindElasticQuota); err == nil || !strings.Contains(err.Error(), `RBAC rule allowing get, list and watch on "elasticquotas" in API group "scheduling.x-k8s.io"`) {
		t.Fatalf("forbidden: %v", err)
	}
}
