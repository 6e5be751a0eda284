package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/wasmsched/wasmsched/host/plugin"
	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/demo"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// The demo of `make run` (wasmsched-up --demo) ends as expected: gpu, zone
// and gang place and hold pods as designed.
func TestDemo(t *testing.T) {
	testwasm.Claim(t)
	dir := t.TempDir()
	for _, p := range demo.Policies {
		if err := os.Symlink(testwasm.Path(t, "examples/"+p.Name), filepath.Join(dir, p.Name+".wasm")); err != nil {
			t.Fatal(err)
		}
	}
	c := startCluster(t, nil)
	if err := demo.Install(context.Background(), c.cp.RestConfig(), dir); err != nil {
		t.Fatal(err)
	}
	cfg, err := demo.SchedulerConfig(c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := controlplane.StartScheduler(context.Background(), controlplane.SchedulerOptions{
		Kubeconfig: c.kubeconfig, ConfigFile: path,
		RegistryOptions: []app.Option{app.WithPlugin(plugin.Name, plugin.New)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	pods, err := demo.Create(context.Background(), c.client)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := demo.Settle(context.Background(), c.client, pods, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	demo.PrintTable(&table, rows)
	if !demo.AllExpected(rows) {
		t.Fatalf("demo pods did not end as expected:\n%s", table.String())
	}
	// Web pods spread over the three zones, off the GPU nodes.
	zones := map[string]bool{}
	for _, r := range rows {
		if strings.HasPrefix(r.Pod, "web-") {
			zones[r.Zone] = true
			if strings.Contains(r.Node, "gpu") {
				t.Errorf("%s landed on GPU node %s", r.Pod, r.Node)
			}
		}
	}
	if len(zones) != 3 {
		t.Errorf("web pods in zones %v, want all three:\n%s", zones, table.String())
	}
}
