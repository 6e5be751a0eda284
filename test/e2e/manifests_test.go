package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"

	"github.com/wasmsched/wasmsched/host/plugin"
	"github.com/wasmsched/wasmsched/host/skew"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// schedulerBin is the kube-scheduler binary, built once per test process.
var schedulerBin struct {
	once sync.Once
	path string
	err  error
}

// schedulerBinary returns cmd/kube-scheduler built with the race detector,
// so that the host packages run under it in every test that starts the
// binary (see [replica] for how a race fails a test). The first call builds
// it (about 30 s warm, minutes cold) into testwasm.SharedDir: the process's
// own directory, which testwasm.Main removes when the test process ends, or
// the one the processes running these tests side by side share (make
// test), where the first to get the lock builds it for all. Tests that need
// it are skipped with -short.
func schedulerBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the kube-scheduler binary")
	}
	dir := testwasm.SharedDir(t)
	schedulerBin.once.Do(func() {
		path := filepath.Join(dir, "kube-scheduler")
		defer testwasm.Lock(t, path+".lock")()
		if _, err := os.Stat(path + ".built"); err == nil {
			schedulerBin.path = path // another process built it
			return
		}
		start := time.Now()
		build := exec.Command("make", "-s", "--no-print-directory", "build-scheduler", "SCHEDULER_OUT="+path, "SCHEDULER_FLAGS=-race",
			"SCHEDULER_LDFLAGS=-X github.com/tetratelabs/wazero/internal/version.version="+wazeroVersion())
		build.Dir = testwasm.Root(t)
		if out, err := build.CombinedOutput(); err != nil {
			schedulerBin.err = fmt.Errorf("build kube-scheduler -race: %v\n%s", err, out)
			return
		}
		if err := os.WriteFile(path+".built", nil, 0o644); err != nil {
			schedulerBin.err = err
			return
		}
		t.Logf("built kube-scheduler with -race in %v", time.Since(start).Round(time.Second))
		schedulerBin.path = path
	})
	if schedulerBin.err != nil {
		t.Fatal(schedulerBin.err)
	}
	if schedulerBin.path == "" {
		t.Fatal("the kube-scheduler build failed in an earlier test")
	}
	return schedulerBin.path
}

// wazeroVersion is the wazero version this test process reports, which
// names its compilation cache directory and is checked when a cached module
// is loaded. A test binary carries no module versions, so wazero calls
// itself "dev" here (the same lookup as wazero's internal/version); the
// scheduler built for the tests is linked with the same name, so that it
// loads the modules the test precompiled (see precompile).
func wazeroVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/tetratelabs/wazero" && dep.Version != "" && dep.Version != "(devel)" {
				return dep.Version
			}
		}
	}
	return "dev"
}

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

// applyManifests creates every object of the manifests through client and
// returns the scheduler configuration's ConfigMap.
func applyManifests(t *testing.T, client kubernetes.Interface) *v1.ConfigMap {
	t.Helper()
	ctx := context.Background()
	opts := metav1.CreateOptions{FieldValidation: "Strict"}
	var cfg *v1.ConfigMap
	for _, obj := range readManifests(t) {
		var err error
		switch o := obj.(type) {
		case *v1.Namespace:
			_, err = client.CoreV1().Namespaces().Create(ctx, o, opts)
		case *v1.ServiceAccount:
			_, err = client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, opts)
		case *v1.ConfigMap:
			if o.Name == "wasmsched-config" {
				cfg = o
			}
			_, err = client.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, opts)
		case *rbacv1.ClusterRole:
			_, err = client.RbacV1().ClusterRoles().Create(ctx, o, opts)
		case *rbacv1.ClusterRoleBinding:
			_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, o, opts)
		case *rbacv1.Role:
			_, err = client.RbacV1().Roles(o.Namespace).Create(ctx, o, opts)
		case *rbacv1.RoleBinding:
			_, err = client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, opts)
		case *appsv1.Deployment:
			_, err = client.AppsV1().Deployments(o.Namespace).Create(ctx, o, opts)
		default:
			t.Fatalf("unexpected object %T in the manifests", obj)
		}
		if err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
	}
	if cfg == nil {
		t.Fatal("no scheduler configuration ConfigMap (wasmsched-config)")
	}
	return cfg
}

// The manifests are valid: the API server accepts every object, and the
// embedded scheduler configuration loads, validates and carries valid
// WasmPolicy arguments.
func TestManifestsApply(t *testing.T) {
	c := startCluster(t, nil)
	cfg := applyManifests(t, c.client)
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
	testwasm.Claim(t)
	bin := schedulerBinary(t)
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if want := "Kubernetes v" + skew.Minor + "."; err != nil || !strings.Contains(string(out), want) {
		t.Fatalf("kube-scheduler --version = %q, %v; want %s<patch>, the minor it links", out, err, want)
	}

	c := startCluster(t, nil)
	// With leader election, as deployed: without it, kube-scheduler exits
	// 1 when asked to stop, which replica.stop would take for a failure.
	c.namespace(policyNamespace)
	cfg := electedConfig(t, c.kubeconfig, []policy{{Name: "nodepin", Package: "examples/nodepin", Settings: `{"nodes": ["two"]}`}}, steadyLease, 0)
	precompile(t, testwasm.Bytes(t, "examples/nodepin"))
	r := startReplica(t, "kube-scheduler", cfg)
	c.node("one", nil)
	c.node("two", nil)
	c.pod("via-binary")
	if node := c.waitBound("via-binary", 60*time.Second); node != "two" {
		t.Fatalf("bound to %s, want two", node)
	}
	if !strings.Contains(r.out.String(), "Policy loaded") {
		t.Fatalf("the scheduler's log has no \"Policy loaded\" line")
	}
	r.stop()
}
