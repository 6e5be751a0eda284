// Package chart renders the Helm chart charts/wasmsched with Helm as a Go
// library, as `helm template` or `helm install` would: the values checked
// against values.schema.json, the templates rendered, the manifests in
// Helm's install order. The tests apply what it renders to an in-process
// API server, and make generate writes manifests/ from it
// (chart/chartgen).
//
// It never talks to a cluster: the Kubernetes version the templates see
// is Options.KubeVersion.
package chart

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Dir is the chart's folder, relative to the repository's root.
const Dir = "charts/wasmsched"

// Options say what to render.
type Options struct {
	// ReleaseName and Namespace are the release's (helm install NAME -n NAMESPACE).
	ReleaseName, Namespace string
	// KubeVersion is the cluster's version as the templates see it
	// (.Capabilities.KubeVersion), such as v1.37.2; empty: Helm's default.
	KubeVersion string
	// Values override the chart's values.yaml, as helm's --values would.
	Values map[string]any
	// SkipSchemaValidation is helm's --skip-schema-validation: the
	// templates' own checks still run.
	SkipSchemaValidation bool
}

// Manifest is one rendered object.
type Manifest struct {
	// Template is the template that rendered it (templates/rbac.yaml).
	Template string
	// YAML is the object as rendered, comments included.
	YAML []byte
	// Object is the object decoded.
	Object *unstructured.Unstructured
}

// Rendered is a rendered release.
type Rendered struct {
	// Templates maps each template that rendered anything
	// (templates/rbac.yaml) to its output, comments included.
	Templates map[string]string
	// Manifests are the objects in Helm's install order (namespaces, CRDs,
	// service accounts, roles, ..., then the rest).
	Manifests []Manifest
}

// Load reads the chart from its folder (root is the repository's root).
func Load(root string) (*chart.Chart, error) {
	return loader.Load(filepath.Join(root, Dir))
}

// Render renders the chart at root with opts. A value the schema refuses,
// or a template's refusal (fail), is an error that names the value.
func Render(root string, opts Options) (*Rendered, error) {
	c, err := Load(root)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", Dir, err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	if opts.KubeVersion != "" {
		kv, err := chartutil.ParseKubeVersion(opts.KubeVersion)
		if err != nil {
			return nil, err
		}
		caps.KubeVersion = *kv
	}
	if c.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(c.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart requires kubeVersion %s, the cluster is %s", c.Metadata.KubeVersion, caps.KubeVersion.String())
	}
	vals := opts.Values
	if vals == nil {
		vals = map[string]any{}
	}
	rv, err := chartutil.ToRenderValuesWithSchemaValidation(c, vals, chartutil.ReleaseOptions{
		Name: opts.ReleaseName, Namespace: opts.Namespace, Revision: 1, IsInstall: true,
	}, caps, opts.SkipSchemaValidation)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(c, rv)
	if err != nil {
		return nil, err
	}
	out := &Rendered{Templates: map[string]string{}}
	for name, text := range files {
		if strings.HasSuffix(name, "NOTES.txt") || strings.TrimSpace(text) == "" {
			continue
		}
		out.Templates[strings.TrimPrefix(name, c.Name()+"/")] = text
	}
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil, err
	}
	if len(hooks) > 0 {
		return nil, errors.New("the chart has hooks, which Render does not run")
	}
	for _, m := range manifests {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(m.Content), &obj.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		out.Manifests = append(out.Manifests, Manifest{
			Template: strings.TrimPrefix(m.Name, c.Name()+"/"), YAML: []byte(m.Content), Object: obj,
		})
	}
	return out, nil
}

// Kind returns the manifests of kind (ClusterRole), in order.
func (r *Rendered) Kind(kind string) []*unstructured.Unstructured {
	var objs []*unstructured.Unstructured
	for _, m := range r.Manifests {
		if m.Object.GetKind() == kind {
			objs = append(objs, m.Object)
		}
	}
	return objs
}

// Decode splits a multi-document YAML stream into its objects (empty
// documents skipped).
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			return nil, err
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// Lint runs helm lint's checks on the chart at root for a cluster of
// kubeVersion (v1.37.0) and fails on any error they report.
func Lint(root, kubeVersion string) error {
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return err
	}
	res := lint.AllWithKubeVersion(filepath.Join(root, Dir), map[string]any{}, "wasmsched-system", kv)
	var errs []string
	for _, m := range res.Messages {
		if m.Severity >= support.ErrorSev {
			errs = append(errs, m.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("helm lint %s:\n%s", Dir, strings.Join(errs, "\n"))
	}
	return nil
}
