// The chart is rendered with Helm, which needs the API machinery of the
// default minor: these tests run on it alone (make test), not in the older
// minors' smoke runs.

//go:build !k8s1.35 && !k8s1.36

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/plugin"
	"github.com/wasmsched/wasmsched/host/skew"
	"github.com/wasmsched/wasmsched/internal/chart"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// renderChart renders charts/wasmsched as the release wasmsched in
// policyNamespace, which it creates, for this build's Kubernetes minor,
// with values over the chart's defaults.
func renderChart(t *testing.T, values map[string]any) *chart.Rendered {
	t.Helper()
	vals := map[string]any{"namespace": map[string]any{"create": true}}
	for k, v := range values {
		vals[k] = v
	}
	r, err := chart.Render(testwasm.Root(t), chart.Options{
		ReleaseName: "wasmsched", Namespace: policyNamespace, KubeVersion: "v" + skew.Minor + ".0", Values: vals,
	})
	if err != nil {
		t.Fatalf("render the chart: %v", err)
	}
	return r
}

// installChart renders the chart (renderChart) and creates every object
// through the admin's client as helm install would: in Helm's install
// order, with strict field validation, the CRD established before the
// objects of its kind. It returns the render and how long the creation
// took.
func (c *cluster) installChart(values map[string]any) (*chart.Rendered, time.Duration) {
	c.t.Helper()
	r := renderChart(c.t, values)
	start := time.Now()
	ctx := context.Background()
	cfg := c.cp.RestConfig()
	dyn := dynamic.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))
	for _, m := range r.Manifests {
		obj := m.Object
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			mapper.Reset()
			mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		if err != nil {
			c.t.Fatalf("%s: %s %s: %v", m.Template, gvk.Kind, obj.GetName(), err)
		}
		var res dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			res = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := res.Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict", FieldManager: "helm"}); err != nil {
			c.t.Fatalf("%s: create %s %s: %v", m.Template, gvk.Kind, obj.GetName(), err)
		}
		if gvk.Kind == "CustomResourceDefinition" {
			waitFor(c.t, "CRD "+obj.GetName()+" established", time.Minute, func() bool {
				u, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
				if err != nil {
					return false
				}
				conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
				for _, cd := range conds {
					if m, ok := cd.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
						return true
					}
				}
				return false
			})
			mapper.Reset()
		}
	}
	return r, time.Since(start)
}

// schedulerConfigOf returns the scheduler configuration the render's
// ConfigMap holds.
func schedulerConfigOf(t *testing.T, r *chart.Rendered) string {
	t.Helper()
	for _, cm := range r.Kind("ConfigMap") {
		if cm.GetName() == "wasmsched-config" {
			data, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
			return data
		}
	}
	t.Fatal("the chart renders no ConfigMap wasmsched-config")
	return ""
}

// The chart installs on a cluster as rendered, with every optional part
// that needs no other operator (context kinds, a policy), and its
// scheduler configuration loads, validates and carries valid WasmPolicy
// arguments.
func TestChartApply(t *testing.T) {
	c := startCluster(t, nil)
	r, took := c.installChart(map[string]any{
		"context": []any{"scheduling.k8s.io/v1/priorityclasses", "v1/limitranges"},
		"policies": []any{map[string]any{"name": "nodepin", "spec": map[string]any{
			"module":   map[string]any{"sha256": "0000000000000000000000000000000000000000000000000000000000000000", "file": "/etc/wasmsched/policies/nodepin.wasm"},
			"settings": map[string]any{"nodes": []any{"two"}},
		}}},
	})
	t.Logf("chart installed: %d objects in %v", len(r.Manifests), took.Round(time.Millisecond))
	sp, err := c.dynamic().Resource(api.GVR).Namespace(policyNamespace).Get(context.Background(), "nodepin", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's SchedulingPolicy: %v", err)
	}
	if sp.GetLabels()["wasmsched.io/profile"] != "wasmsched" {
		t.Errorf("the chart's SchedulingPolicy lacks the selector's label: %v", sp.GetLabels())
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(schedulerConfigOf(t, r)), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := options.LoadConfigFromFile(klog.Background(), path)
	if err != nil {
		t.Fatalf("load scheduler configuration: %v", err)
	}
	if err := validation.ValidateKubeSchedulerConfiguration(sc); err != nil {
		t.Fatalf("scheduler configuration: %v", err)
	}
	found := false
	for _, prof := range sc.Profiles {
		for _, pc := range prof.PluginConfig {
			if pc.Name == plugin.Name {
				found = true
				if _, err := plugin.DecodeArgs(pc.Args); err != nil {
					t.Fatalf("WasmPolicy args: %v", err)
				}
			}
		}
	}
	if !found {
		t.Fatal("the configuration does not configure WasmPolicy")
	}
	// Uninstalling leaves the CRD, and so the policies (helm.sh/resource-policy: keep).
	crds := c.dynamic().Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	crd, err := crds.Get(context.Background(), api.CRDName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
		t.Errorf("the installed CRD is not kept on uninstall: annotations %v", crd.GetAnnotations())
	}
}
