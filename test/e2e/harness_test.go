package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/host/plugin"
	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// TestMain: make test runs this package's tests in two processes side by
// side, sharing a claims directory (testwasm.EnvClaims), because they mostly
// wait on control planes and schedulers. Each test runs in one of them:
// startCluster claims the test for its process (testwasm.Claim) or skips it
// when the other process has it. A test that does something costly before
// startCluster, or never calls it, begins with testwasm.Claim(t) itself; one
// that forgets runs in both processes, which costs time and loses nothing.
// Every test process has its own metrics registry, compilation cache and
// ProcessDir; schedulerBinary's build is shared (testwasm.SharedDir).
func TestMain(m *testing.M) { testwasm.Main(m, controlplane.QuietLogs) }

// policy is one WasmPolicy entry for a test's scheduler configuration.
type policy struct {
	Name          string
	Package       string // built with testwasm, e.g. "examples/nodepin"
	File          string // a module already built, instead of Package (e.g. testwasm.TinyGoPath)
	Settings      string
	Weight        int
	FailurePolicy string
	Timeout       string
	ConfigMap     string // source: ConfigMaps of this policy name instead of Package
	Mode, Shadows string
	OnDelete      string
	MaxInstances  int
}

func (p policy) args(t *testing.T) map[string]any {
	a := map[string]any{"name": p.Name}
	if p.ConfigMap != "" {
		a["source"] = map[string]any{"configMap": p.ConfigMap}
	} else if p.File != "" {
		a["source"] = map[string]any{"file": p.File}
	} else {
		a["source"] = map[string]any{"file": testwasm.Path(t, p.Package)}
	}
	for k, v := range map[string]string{"mode": p.Mode, "shadows": p.Shadows, "onDelete": p.OnDelete} {
		if v != "" {
			a[k] = v
		}
	}
	if p.Settings != "" {
		a["settings"] = json.RawMessage(p.Settings)
	}
	if p.Weight != 0 {
		a["weight"] = p.Weight
	}
	if p.FailurePolicy != "" {
		a["failurePolicy"] = p.FailurePolicy
	}
	if p.Timeout != "" {
		a["timeout"] = p.Timeout
	}
	if p.MaxInstances != 0 {
		a["maxInstances"] = p.MaxInstances
	}
	return a
}

// policyNamespace holds policy ConfigMaps in the tests.
const policyNamespace = "wasmsched-system"

// cluster is a control plane and a scheduler for one test.
type cluster struct {
	t          *testing.T
	cp         *controlplane.ControlPlane
	client     kubernetes.Interface
	kubeconfig string
	config     string
	sched      *controlplane.Scheduler
	// live are replicas that must keep running while the test waits on
	// the published status: such a wait fails as soon as one has exited,
	// rather than at its deadline.
	live []*replica
}

// liveRunning fails the test at once if one of c.live has exited.
func (c *cluster) liveRunning() {
	c.t.Helper()
	for _, r := range c.live {
		r.running()
	}
}

// schedulerConfig writes a configuration enabling WasmPolicy (at every
// point, with a weight that makes its score dominate) in the default
// profile; each tweak may then edit the configuration.
func schedulerConfig(t *testing.T, dir, kubeconfig string, policies []policy, tweaks ...func(cfg map[string]any)) string {
	t.Helper()
	var args []any
	for _, p := range policies {
		args = append(args, p.args(t))
	}
	cfg := map[string]any{
		"apiVersion":       "kubescheduler.config.k8s.io/v1",
		"kind":             "KubeSchedulerConfiguration",
		"clientConnection": map[string]any{"kubeconfig": kubeconfig},
		"leaderElection":   map[string]any{"leaderElect": false},
		"profiles": []any{map[string]any{
			"schedulerName": "default-scheduler",
			"plugins":       map[string]any{"multiPoint": map[string]any{"enabled": []any{map[string]any{"name": plugin.Name, "weight": 50}}}},
			"pluginConfig":  []any{map[string]any{"name": plugin.Name, "args": map[string]any{"namespace": policyNamespace, "policies": args}}},
		}},
	}
	for _, tweak := range tweaks {
		tweak(cfg)
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "scheduler.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startCluster starts a control plane and, unless policies is nil, an
// in-process scheduler with them (its configuration edited by tweaks). It
// first claims the test for this process, skipping it when another process
// running these tests has it (see TestMain).
func startCluster(t *testing.T, policies []policy, tweaks ...func(cfg map[string]any)) *cluster {
	t.Helper()
	testwasm.Claim(t)
	ctx := context.Background()
	cp, err := controlplane.Start(ctx, controlplane.Options{TB: t})
	if err != nil {
		t.Fatalf("control plane: %v", err)
	}
	c := &cluster{t: t, cp: cp, client: cp.Client()}
	dir := t.TempDir()
	c.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := cp.WriteKubeconfig(c.kubeconfig); err != nil {
		t.Fatal(err)
	}
	if policies != nil {
		restartScheduler(t, c, policies, tweaks...)
	}
	return c
}

// restartScheduler stops c's scheduler, if one runs, and starts an
// in-process scheduler for c with policies.
func restartScheduler(t *testing.T, c *cluster, policies []policy, tweaks ...func(cfg map[string]any)) {
	t.Helper()
	if c.sched != nil {
		c.sched.Stop()
	}
	c.config = schedulerConfig(t, t.TempDir(), c.kubeconfig, policies, tweaks...)
	s, err := controlplane.StartScheduler(context.Background(), controlplane.SchedulerOptions{
		Kubeconfig:      c.kubeconfig,
		ConfigFile:      c.config,
		RegistryOptions: []app.Option{app.WithPlugin(plugin.Name, plugin.New)},
	})
	if err != nil {
		t.Fatalf("scheduler: %v", err)
	}
	c.sched = s
	t.Cleanup(s.Stop)
}

func (c *cluster) node(name string, labels map[string]string) *v1.Node {
	c.t.Helper()
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("16Gi"), v1.ResourcePods: resource.MustParse("110")}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: v1.NodeStatus{Allocatable: alloc, Capacity: alloc}}
	n, err := c.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("create node %s: %v", name, err)
	}
	return n
}

func (c *cluster) pod(name string, mutate ...func(*v1.Pod)) *v1.Pod {
	c.t.Helper()
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}}},
	}
	for _, m := range mutate {
		m(p)
	}
	p, err := c.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("create pod %s: %v", name, err)
	}
	return p
}

// waitBound waits for a pod to be bound and returns its node.
func (c *cluster) waitBound(name string, timeout time.Duration) string {
	c.t.Helper()
	var node string
	err := testwasm.Poll(c.t, 50*time.Millisecond, timeout, func(ctx context.Context) (bool, error) {
		p, err := c.client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = p.Spec.NodeName
		return node != "", nil
	})
	if err != nil {
		c.t.Fatalf("pod %s not bound within %v: %v (%s)", name, timeout, err, c.describe(name))
	}
	return node
}

// waitUnschedulable waits for the scheduler to report a pod unschedulable
// and returns the message of its FailedScheduling event.
func (c *cluster) waitUnschedulable(name string, timeout time.Duration) string {
	c.t.Helper()
	var msg string
	err := testwasm.Poll(c.t, 100*time.Millisecond, timeout, func(ctx context.Context) (bool, error) {
		evs, err := c.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=FailedScheduling"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			msg = e.Message
		}
		return msg != "", nil
	})
	if err != nil {
		c.t.Fatalf("no FailedScheduling event for pod %s within %v: %v (%s)", name, timeout, err, c.describe(name))
	}
	p, err := c.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	if p.Spec.NodeName != "" {
		c.t.Fatalf("pod %s has a FailedScheduling event but is bound to %s", name, p.Spec.NodeName)
	}
	return msg
}

// stayUnbound asserts that a pod is still unbound after d.
func (c *cluster) stayUnbound(name string, d time.Duration) {
	c.t.Helper()
	time.Sleep(d)
	p, err := c.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	if p.Spec.NodeName != "" {
		c.t.Fatalf("pod %s was bound to %s, want it unbound", name, p.Spec.NodeName)
	}
}

func (c *cluster) describe(name string) string {
	p, err := c.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, cond := range p.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message))
	}
	return "node=" + p.Spec.NodeName + " " + strings.Join(parts, "; ")
}

func labels(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}
