package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/source"
)

// PolicyNamespace holds the demo's SchedulingPolicies and their chunks.
const PolicyNamespace = "wasmsched-system"

// ProfileLabel and ProfileValue select the demo's SchedulingPolicies: the
// scheduler configuration's default-scheduler profile runs those labelled
// ProfileLabel=ProfileValue, the label manifests/config.yaml's profile
// selects too (so that one documented label works on both).
const (
	ProfileLabel = "wasmsched.io/profile"
	ProfileValue = "wasmsched"
)

// Probation is how long the demo's revisions serve before they become the
// last good ones (shorter than a production scheduler's default, so that a
// newcomer sees it happen).
const Probation = "30s"

// SchedulerConfig returns a KubeSchedulerConfiguration that enables the
// WasmPolicy plugin in the default profile, selecting the SchedulingPolicies
// of PolicyNamespace labelled ProfileLabel=ProfileValue (Install
// creates the demo's).
func SchedulerConfig(kubeconfig string) ([]byte, error) {
	cfg := map[string]any{
		"apiVersion":       "kubescheduler.config.k8s.io/v1",
		"kind":             "KubeSchedulerConfiguration",
		"clientConnection": map[string]any{"kubeconfig": kubeconfig},
		"leaderElection":   map[string]any{"leaderElect": false},
		"profiles": []any{map[string]any{
			"schedulerName": "default-scheduler",
			"plugins": map[string]any{
				"multiPoint": map[string]any{"enabled": []any{map[string]any{"name": "WasmPolicy", "weight": 5}}},
			},
			"pluginConfig": []any{map[string]any{"name": "WasmPolicy", "args": map[string]any{
				"namespace": PolicyNamespace,
				"schedulingPolicies": map[string]any{"selector": map[string]any{
					"matchLabels": map[string]any{ProfileLabel: ProfileValue}}},
				"probation": Probation,
			}}},
		}},
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(js)
}

// Install installs the SchedulingPolicy CRD and, from policyDir
// (<name>.wasm each), the demo's policies: their chunk ConfigMaps and a
// SchedulingPolicy each, in PolicyNamespace. It fails naming the first
// missing module.
func Install(ctx context.Context, cfg *rest.Config, policyDir string) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := api.Install(ctx, dyn); err != nil {
		return err
	}
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: PolicyNamespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for i, p := range Policies {
		path := filepath.Join(policyDir, p.Name+".wasm")
		module, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("policy %s: %w (run make examples)", p.Name, err)
		}
		cms, err := source.PackModule(PolicyNamespace, module)
		if err != nil {
			return fmt.Errorf("policy %s: %w", p.Name, err)
		}
		for _, cm := range cms {
			if _, err := client.CoreV1().ConfigMaps(PolicyNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("policy %s: %w", p.Name, err)
			}
		}
		sp := &api.SchedulingPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: PolicyNamespace, Labels: map[string]string{ProfileLabel: ProfileValue}},
			Spec: api.SchedulingPolicySpec{Module: api.Module{SHA256: source.Digest(module)}, Settings: json.RawMessage(p.Settings),
				Weight: int64(p.Weight), Order: int32(i), FailurePolicy: api.FailurePolicyFail, Mode: api.ModeEnforce},
		}
		u, err := api.ToUnstructured(sp)
		if err != nil {
			return err
		}
		if _, err := dyn.Resource(api.GVR).Namespace(PolicyNamespace).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("SchedulingPolicy %s: %w", p.Name, err)
		}
	}
	return nil
}

// WithKubeconfig reads a KubeSchedulerConfiguration file and points its
// clientConnection.kubeconfig at kubeconfig, with leader election off.
func WithKubeconfig(path, kubeconfig string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cc, _ := cfg["clientConnection"].(map[string]any)
	if cc == nil {
		cc = map[string]any{}
	}
	cc["kubeconfig"] = kubeconfig
	cfg["clientConnection"] = cc
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	return yaml.Marshal(cfg)
}
