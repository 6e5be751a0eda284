package demo

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// SchedulerConfig returns a KubeSchedulerConfiguration that enables the
// WasmPolicy plugin in the default profile with the demo policies from
// policyDir (<name>.wasm each). It fails naming the first missing module.
func SchedulerConfig(kubeconfig, policyDir string) ([]byte, error) {
	var policies []map[string]any
	for _, p := range Policies {
		path, err := filepath.Abs(filepath.Join(policyDir, p.Name+".wasm"))
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("policy %s: %w (run make examples)", p.Name, err)
		}
		policies = append(policies, map[string]any{
			"name":          p.Name,
			"source":        map[string]any{"file": path},
			"weight":        p.Weight,
			"failurePolicy": "Fail",
			"settings":      json.RawMessage(p.Settings),
		})
	}
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
			"pluginConfig": []any{map[string]any{"name": "WasmPolicy", "args": map[string]any{"policies": policies}}},
		}},
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(js)
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
