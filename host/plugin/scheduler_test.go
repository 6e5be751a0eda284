//go:build !nocontrolplane

// Left out with -tags nocontrolplane: make test runs this package under the
// race detector without the tests that start a control plane, which would
// link the API server, compiled with -race on 2 cores at a cold cache, for
// them alone; they run without -race (Makefile, CP_PKGS).

package plugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/wasmsched/wasmsched/internal/controlplane"
)

// testCluster is a control plane started for one test, on which tests start
// schedulers running this package's plugin in-process.
type testCluster struct {
	*controlplane.ControlPlane
	dir, kubeconfig string
}

// startCluster starts a control plane for t, stopped when t ends.
func startCluster(t *testing.T) *testCluster {
	t.Helper()
	controlplane.QuietLogs()
	cp, err := controlplane.Start(context.Background(), controlplane.Options{TB: t})
	if err != nil {
		t.Fatalf("control plane: %v", err)
	}
	c := &testCluster{ControlPlane: cp, dir: t.TempDir()}
	c.kubeconfig = filepath.Join(c.dir, "kubeconfig")
	if err := cp.WriteKubeconfig(c.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return c
}

// scheduler starts a scheduler with one profile, default-scheduler, that
// enables WasmPolicy (at weight, or the default weight for 0) with args,
// after the pluginConfig entries in others. It returns the start-up error;
// a scheduler that starts is stopped when t ends.
func (c *testCluster) scheduler(t *testing.T, args map[string]any, weight int, others ...any) error {
	t.Helper()
	_, err := c.startScheduler(t, args, weight, others...)
	return err
}

// startScheduler is scheduler, returning the scheduler, which a test may
// stop before it ends.
func (c *testCluster) startScheduler(t *testing.T, args map[string]any, weight int, others ...any) (*controlplane.Scheduler, error) {
	t.Helper()
	plugin := map[string]any{"name": Name}
	if weight > 0 {
		plugin["weight"] = weight
	}
	cfg := map[string]any{
		"apiVersion":       "kubescheduler.config.k8s.io/v1",
		"kind":             "KubeSchedulerConfiguration",
		"clientConnection": map[string]any{"kubeconfig": c.kubeconfig},
		"leaderElection":   map[string]any{"leaderElect": false},
		"profiles": []any{map[string]any{
			"schedulerName": "default-scheduler",
			"plugins":       map[string]any{"multiPoint": map[string]any{"enabled": []any{plugin}}},
			"pluginConfig":  append(others, map[string]any{"name": Name, "args": args}),
		}},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(c.dir, "scheduler.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := controlplane.StartScheduler(context.Background(), controlplane.SchedulerOptions{Kubeconfig: c.kubeconfig, ConfigFile: path,
		RegistryOptions: []app.Option{app.WithPlugin(Name, New)}})
	if err != nil {
		return nil, err
	}
	t.Cleanup(s.Stop)
	return s, nil
}
