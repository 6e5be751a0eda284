package chart

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// render renders the chart as release wasmsched in wasmsched-system on
// Kubernetes 1.37.2 with values (YAML).
func render(t *testing.T, values string) (*Rendered, error) {
	t.Helper()
	return renderOn(t, "v1.37.2", values, false)
}

func renderOn(t *testing.T, kube, values string, skipSchema bool) (*Rendered, error) {
	t.Helper()
	vals := map[string]any{}
	if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
		t.Fatalf("values %q: %v", values, err)
	}
	return Render(testwasm.Root(t), Options{ReleaseName: "wasmsched", Namespace: "wasmsched-system",
		KubeVersion: kube, Values: vals, SkipSchemaValidation: skipSchema})
}

// The default values render the scheduler and everything it needs, and
// nothing optional.
func TestDefaults(t *testing.T) {
	r, err := render(t, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range r.Manifests {
		got = append(got, m.Object.GetKind()+"/"+m.Object.GetName())
	}
	want := []string{
		"ServiceAccount/wasmsched-scheduler",
		"ConfigMap/wasmsched-config", "ConfigMap/wasmsched-status", "ConfigMap/wasmsched-policy-state",
		"CustomResourceDefinition/schedulingpolicies.wasmsched.io",
		"ClusterRole/wasmsched-scheduler",
		"ClusterRoleBinding/wasmsched-scheduler", "ClusterRoleBinding/wasmsched-scheduler-as-volume-scheduler",
		"Role/wasmsched-scheduler", "RoleBinding/wasmsched-scheduler-authentication-reader", "RoleBinding/wasmsched-scheduler",
		"Deployment/wasmsched-scheduler", "PodDisruptionBudget/wasmsched-scheduler",
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			t.Errorf("the default render lacks %s; it has %s", w, strings.Join(got, ", "))
		}
	}
	if len(got) != len(want) {
		t.Errorf("the default render has %d objects, want %d: %s", len(got), len(want), strings.Join(got, ", "))
	}
	crd := r.Kind("CustomResourceDefinition")[0]
	if crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
		t.Errorf("the CRD is not kept on uninstall: annotations %v", crd.GetAnnotations())
	}
}

// The image is the one built for the cluster's minor unless
// kubernetesMinor names one; a digest pins it.
func TestImage(t *testing.T) {
	for _, c := range []struct{ kube, values, want string }{
		{"v1.37.2", "", "ghcr.io/wasmsched/kube-scheduler:v0.1.0-k8s1.37"},
		{"v1.36.5", "", "ghcr.io/wasmsched/kube-scheduler:v0.1.0-k8s1.36"},
		{"v1.37.2", "kubernetesMinor: \"1.35\"", "ghcr.io/wasmsched/kube-scheduler:v0.1.0-k8s1.35"},
		{"v1.37.2", "image: {repository: registry.local/ks, tag: mine}", "registry.local/ks:mine"},
		{"v1.37.2", "image: {repository: r.local/ks, digest: sha256:" + strings.Repeat("ab", 32) + "}", "r.local/ks@sha256:" + strings.Repeat("ab", 32)},
	} {
		r, err := renderOn(t, c.kube, c.values, false)
		if err != nil {
			t.Fatalf("%s %q: %v", c.kube, c.values, err)
		}
		d := r.Kind("Deployment")[0]
		containers, _, _ := unstructuredSlice(d.Object, "spec", "template", "spec", "containers")
		if got := containers[0].(map[string]any)["image"]; got != c.want {
			t.Errorf("on %s with %q: image %v, want %s", c.kube, c.values, got, c.want)
		}
	}
}

// The value context grants get, list and watch on exactly the kinds it
// names, grouped by API group, and nothing else.
func TestContextRBAC(t *testing.T) {
	r, err := render(t, `context: [scheduling.x-k8s.io/v1alpha1/elasticquotas, scheduling.k8s.io/v1/priorityclasses, v1/limitranges]`)
	if err != nil {
		t.Fatal(err)
	}
	var role map[string]any
	for _, cr := range r.Kind("ClusterRole") {
		if cr.GetName() == "wasmsched-scheduler-context" {
			role = cr.Object
		}
	}
	if role == nil {
		t.Fatal("no ClusterRole wasmsched-scheduler-context")
	}
	got, _ := yaml.Marshal(role["rules"])
	want := `- apiGroups:
  - ""
  resources:
  - limitranges
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - scheduling.k8s.io
  resources:
  - priorityclasses
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - scheduling.x-k8s.io
  resources:
  - elasticquotas
  verbs:
  - get
  - list
  - watch
`
	if string(got) != want {
		t.Errorf("context rules:\n%s\nwant:\n%s", got, want)
	}
	if len(r.Kind("ClusterRoleBinding")) != 3 {
		t.Errorf("want the context ClusterRole bound")
	}
}

// Every value that would widen the scheduler's rights beyond what it and
// its policies need, or lift a sandbox limit, is refused with an error
// naming it: by the schema, and by the templates when the schema is
// skipped (helm --skip-schema-validation).
func TestRefusedValues(t *testing.T) {
	for _, c := range []struct {
		name, values string
		kube         string
		want         []string // in the error
		template     bool     // refused by the templates too
	}{
		{"context secrets", `context: [v1/secrets]`, "", []string{"/context/0"}, true},
		{"context wildcard resource", `context: ["apps/v1/*"]`, "", []string{"/context/0"}, true},
		{"context wildcard group", `context: ["*/v1/pods"]`, "", []string{"/context/0"}, true},
		{"context not a kind", `context: [pods]`, "", []string{"/context/0"}, true},
		{"extra RBAC rules", `rbac: {extraRules: [{apiGroups: ["*"], resources: ["*"], verbs: ["*"]}]}`, "", []string{"rbac"}, false},
		{"context verbs", `contextVerbs: [create]`, "", []string{"contextVerbs"}, false},
		{"zero timeout", `ceilings: {timeout: 0s}`, "", []string{"/ceilings/timeout"}, false},
		{"no timeout", `ceilings: {timeout: null}`, "", []string{"/ceilings", "timeout"}, false},
		{"zero instances", `ceilings: {maxInstances: 0}`, "", []string{"/ceilings/maxInstances"}, false},
		{"zero memory", `ceilings: {memoryLimit: "0Mi"}`, "", []string{"/ceilings/memoryLimit"}, false},
		{"unlimited memory", `ceilings: {memoryLimit: unlimited}`, "", []string{"/ceilings/memoryLimit"}, false},
		{"unsupported minor", `kubernetesMinor: "1.34"`, "", []string{"/kubernetesMinor"}, false},
		{"cluster minor without an image", ``, "v1.38.0", []string{"kubernetesMinor", "Kubernetes 1.38", "1.37, 1.36, 1.35"}, true},
		{"default scheduler's name", `schedulerName: default-scheduler`, "", []string{"/schedulerName"}, false},
		{"policy reading an ungranted kind", `policies: [{name: q, spec: {module: {sha256: "` + strings.Repeat("0", 64) + `", file: /p.wasm}, context: [scheduling.x-k8s.io/v1alpha1/elasticquotas]}}]`, "",
			[]string{"policies[0].spec.context[0]", "scheduling.x-k8s.io/v1alpha1/elasticquotas"}, true},
		{"selector and names", `schedulingPolicies: {names: [a]}`, "", []string{"schedulingPolicies", "not both"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			kube := c.kube
			if kube == "" {
				kube = "v1.37.2"
			}
			for _, skip := range []bool{false, true} {
				if skip && !c.template {
					continue
				}
				_, err := renderOn(t, kube, c.values, skip)
				if err == nil {
					t.Fatalf("%s (skip schema %v) rendered", c.values, skip)
				}
				for _, w := range c.want {
					if !skip && !strings.Contains(err.Error(), w) {
						t.Errorf("%s: error %q does not name %q", c.values, err, w)
					}
				}
				t.Logf("skip schema %v: %v", skip, err)
			}
		})
	}
}

// manifests/ is the chart rendered by make generate, byte for byte.
func TestManifestsGenerated(t *testing.T) {
	root := testwasm.Root(t)
	files, err := ManifestFiles(root, "1.37")
	if err != nil {
		t.Fatal(err)
	}
	onDisk, _ := filepath.Glob(filepath.Join(root, ManifestsDir, "*.yaml"))
	if len(onDisk) != len(files) {
		t.Errorf("manifests/ holds %d YAML files, the chart renders %d: run make generate", len(onDisk), len(files))
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, ManifestsDir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("manifests/%s differs from the chart's render (%v): run make generate", name, err)
		}
	}
}

func unstructuredSlice(obj map[string]any, path ...string) ([]any, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[p]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}

// helm lint finds no error in the chart.
func TestLint(t *testing.T) {
	if err := Lint(testwasm.Root(t), "v1.37.0"); err != nil {
		t.Fatal(err)
	}
}

// The values files the operator's guide shows (```yaml blocks opening
// with "# values.yaml") render as shown.
func TestGuideValues(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testwasm.Root(t), "docs", "operators-guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, block := range strings.Split(string(b), "```yaml")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if !strings.HasPrefix(strings.TrimSpace(block), "# values.yaml") {
			continue
		}
		n++
		// The guide indents the block inside a numbered list.
		lines := strings.Split(block, "\n")
		indent := len(lines[1]) - len(strings.TrimLeft(lines[1], " "))
		for i, l := range lines {
			if len(l) >= indent {
				lines[i] = l[indent:]
			}
		}
		if _, err := render(t, strings.Join(lines, "\n")); err != nil {
			t.Errorf("the guide's values block %d: %v", n, err)
		}
	}
	if n == 0 {
		t.Fatal("the operator's guide shows no values.yaml")
	}
}
