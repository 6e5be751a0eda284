package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"

	"github.com/wasmsched/wasmsched/host/plugin"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

var manifestFiles = []string{"namespace.yaml", "rbac.yaml", "config.yaml", "deployment.yaml"}

// readManifests decodes every object of the manifests, in order.
func readManifests(t *testing.T) []runtime.Object {
	t.Helper()
	var objs []runtime.Object
	for _, f := range manifestFiles {
		data, err := os.ReadFile(filepath.Join(testwasm.Root(t), "manifests", f))
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			objs = append(objs, obj)
		}
	}
	return objs
}

// The manifests are valid: the API server accepts every object, and the
// embedded scheduler configuration loads, validates and carries valid
// WasmPolicy arguments.
func TestManifestsApply(t *testing.T) {
	c := startCluster(t, nil)
	ctx := context.Background()
	opts := metav1.CreateOptions{FieldValidation: "Strict"}
	var cfg *v1.ConfigMap
	for _, obj := range readManifests(t) {
		var err error
		switch o := obj.(type) {
		case *v1.Namespace:
			_, err = c.client.CoreV1().Namespaces().Create(ctx, o, opts)
		case *v1.ServiceAccount:
			_, err = c.client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, opts)
		case *v1.ConfigMap:
			cfg = o
			_, err = c.client.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, opts)
		case *rbacv1.ClusterRoleBinding:
			_, err = c.client.RbacV1().ClusterRoleBindings().Create(ctx, o, opts)
		case *rbacv1.Role:
			_, err = c.client.RbacV1().Roles(o.Namespace).Create(ctx, o, opts)
		case *rbacv1.RoleBinding:
			_, err = c.client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, opts)
		case *appsv1.Deployment:
			_, err = c.client.AppsV1().Deployments(o.Namespace).Create(ctx, o, opts)
		default:
			t.Fatalf("unexpected object %T in the manifests", obj)
		}
		if err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
	}
	if cfg == nil {
		t.Fatal("no scheduler configuration ConfigMap")
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cfg.Data["config.yaml"]), 0o644); err != nil {
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
}

// The built kube-scheduler binary runs from a configuration file as a
// separate process and schedules a pod through a WASM policy.
func TestKubeSchedulerBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the kube-scheduler binary")
	}
	bin := filepath.Join(t.TempDir(), "kube-scheduler")
	build := exec.Command("make", "-s", "--no-print-directory", "build-scheduler", "SCHEDULER_OUT="+bin)
	build.Dir = testwasm.Root(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Kubernetes v1.35.8") {
		t.Fatalf("kube-scheduler --version = %q, %v; want Kubernetes v1.35.8", out, err)
	}

	c := startCluster(t, nil)
	cfg := schedulerConfig(t, t.TempDir(), c.kubeconfig, []policy{{Name: "nodepin", Package: "examples/nodepin", Settings: `{"nodes": ["two"]}`}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "--config="+cfg, "--secure-port=0", "--v=2")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("kube-scheduler output:\n%s", logs.String())
		}
	}()
	c.node("one", nil)
	c.node("two", nil)
	c.pod("via-binary")
	if node := c.waitBound("via-binary", 60*time.Second); node != "two" {
		t.Fatalf("bound to %s, want two", node)
	}
	if !strings.Contains(logs.String(), "Policy loaded") {
		t.Fatalf("the scheduler's log has no \"Policy loaded\" line")
	}
}
