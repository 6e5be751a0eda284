package v1alpha1

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

//go:embed schedulingpolicy.crd.yaml
var crdYAML []byte

// CRDYAML returns the CustomResourceDefinition as YAML (manifests/crd.yaml
// is a copy).
func CRDYAML() []byte { return append([]byte(nil), crdYAML...) }

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRD returns the CustomResourceDefinition.
func CRD() (*unstructured.Unstructured, error) {
	m := map[string]any{}
	if err := yaml.Unmarshal(crdYAML, &m); err != nil {
		return nil, fmt.Errorf("embedded CRD: %w", err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// Install creates the CustomResourceDefinition, or updates it to this
// version, and waits (up to a minute) until the API server serves it. The
// client needs create, get and update on customresourcedefinitions.
func Install(ctx context.Context, client dynamic.Interface) error {
	crd, err := CRD()
	if err != nil {
		return err
	}
	api := client.Resource(crdGVR)
	cur, err := api.Get(ctx, CRDName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, crd, metav1.CreateOptions{FieldManager: "wasmsched"})
	case err == nil:
		crd.SetResourceVersion(cur.GetResourceVersion())
		_, err = api.Update(ctx, crd, metav1.UpdateOptions{FieldManager: "wasmsched"})
	}
	if err != nil {
		return fmt.Errorf("install CRD %s: %w", CRDName, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cur, err := api.Get(ctx, CRDName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established: %w", CRDName, err)
	}
	// The discovery of a new resource lags its establishment a little: a
	// list answers once the API server serves it.
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.Resource(GVR).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
}
