// Package crds holds the CustomResourceDefinitions the tests, the demo and
// the examples install on a control plane, and a helper that installs one
// and waits until the API server serves it.
//
// It must never be imported by policy, guest or ABI code.
package crds

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// ElasticQuotaYAML is scheduler-plugins' ElasticQuota CRD
// (scheduling.x-k8s.io/v1alpha1, namespaced; spec.min, spec.max).
//
//go:embed elasticquota.yaml
var ElasticQuotaYAML []byte

// ElasticQuota returns the ElasticQuota CRD as an object.
func ElasticQuota() *apiextensionsv1.CustomResourceDefinition {
	crd, err := Parse(ElasticQuotaYAML)
	if err != nil {
		panic(err)
	}
	return crd
}

// Parse reads one CRD from YAML.
func Parse(data []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("CRD: %w", err)
	}
	return crd, nil
}

// Install creates crd (an existing one of the same name is left as is) and
// waits, within ctx, until the API server reports it Established.
func Install(ctx context.Context, cfg *rest.Config, crd *apiextensionsv1.CustomResourceDefinition) error {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	api := cs.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := api.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("install CRD %s: %w", crd.Name, err)
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established: %w", crd.Name, err)
	}
	return nil
}
