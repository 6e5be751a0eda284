package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/host/skew"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// The smoke suite, TestSmoke*, is what the build for every Kubernetes minor
// must do with the same example modules: `make smoke K8S=<minor>` runs it
// on that minor's control plane and scheduler with the modules of
// bin/policies (testwasm.EnvModules, testwasm.EnvTinyGoModules), and the
// full suite runs it on the default minor with modules it builds.
//
// One control plane, three schedulers in turn: two composed example
// policies placing and rejecting pods, beside probes failing under
// failurePolicy Fail and Ignore; the TinyGo build of an example; a policy
// served from ConfigMaps and hot-reloaded.
func TestSmoke(t *testing.T) {
	t.Logf("Kubernetes %s", skew.Minor)
	probe := func(name, failurePolicy string) policy {
		return policy{Name: name, Package: "test/guests/probe", FailurePolicy: failurePolicy, MaxInstances: 1,
			Settings: fmt.Sprintf(`{"at": "filter", "how": "panic", "when": "hostile=%s"}`, name)}
	}
	composed := []policy{
		{Name: "gpu", Package: "examples/gpu"},
		{Name: "zone", Package: "examples/zone", Settings: `{"deniedZones": ["d"]}`},
		probe("probe-fail", "Fail"),
		probe("probe-ignore", "Ignore"),
	}
	logModules(t, composed)
	c := startCluster(t, composed)
	gpuNode(c, "a100", "NVIDIA-A100-SXM4-80GB", "81920", 4)
	gpuNode(c, "l4", "NVIDIA-L4", "23034", 2)
	for name, zone := range map[string]string{"a100": "a", "l4": "b"} {
		c.setLabel(name, "topology.kubernetes.io/zone", zone)
	}
	c.node("cpu-c", labels("topology.kubernetes.io/zone", "c"))
	c.node("cpu-d", labels("topology.kubernetes.io/zone", "d"))

	// Placement by both policies: gpu sends the A100 job to a100 and keeps
	// the web pod off GPU nodes; zone keeps it off zone d.
	c.pod("train", requestGPUs(3), annotate("gpu.wasmsched.io/product", "NVIDIA-A100-SXM4-80GB"))
	c.pod("web")
	for pod, want := range map[string]string{"train": "a100", "web": "cpu-c"} {
		if n := c.waitBound(pod, 60*time.Second); n != want {
			t.Fatalf("%s on %s, want %s", pod, n, want)
		}
	}
	// Rejections, each with its policy's reason.
	c.pod("pinned-to-d", nodeSelector("topology.kubernetes.io/zone", "d"))
	if msg := c.waitUnschedulable("pinned-to-d", 60*time.Second); !strings.Contains(msg, "zone: zone d is denied") {
		t.Fatalf("FailedScheduling %q lacks the zone reason", msg)
	}
	c.pod("h100", requestGPUs(1), annotate("gpu.wasmsched.io/product", "NVIDIA-H100-80GB-HBM3"))
	if msg := c.waitUnschedulable("h100", 60*time.Second); !strings.Contains(msg, "gpu: wrong GPU product: want NVIDIA-H100-80GB-HBM3") {
		t.Fatalf("FailedScheduling %q lacks the gpu reason", msg)
	}
	// A policy that traps: under Fail the pod stays Pending naming the
	// policy and the failure; under Ignore it is placed, and the skip is
	// an Event and a metric.
	const failure = "filter: wasm error: unreachable: panic: probe: deliberate panic in filter"
	c.pod("fails", label("hostile", "probe-fail"))
	c.waitCondition(t, "fails", 60*time.Second, "probe-fail: policy failed (failurePolicy Fail): policy probe-fail@", failure)
	c.pod("ignored", label("hostile", "probe-ignore"))
	if n := c.waitBound("ignored", 60*time.Second); n != "cpu-c" {
		t.Fatalf("ignored on %s, want cpu-c", n)
	}
	ev := c.waitEvent(t, "ignored", "PolicySkipped", 60*time.Second)
	if want := "probe-ignore: policy failed and was skipped for this attempt (failurePolicy Ignore): policy probe-ignore@"; !strings.Contains(ev, want) || !strings.Contains(ev, failure) {
		t.Fatalf("PolicySkipped event %q lacks %q and %q", ev, want, failure)
	}
	for _, name := range []string{"probe-fail", "probe-ignore"} {
		if v := metricValue(t, "wasmsched_policy_errors_total", map[string]string{"policy": name, "point": "filter", "kind": "trap"}); v < 1 {
			t.Errorf("wasmsched_policy_errors_total{policy=%q,point=filter,kind=trap} = %v, want at least 1", name, v)
		}
	}

	// The TinyGo build of gpu, composed with the Go build of zone: one GPU
	// more packs a100 (one free left, l4 two).
	c.sched.Stop()
	tiny := []policy{tinygoBuild.policy(t, "gpu", ""), composed[1]}
	logModules(t, tiny)
	restartScheduler(t, c, tiny)
	c.pod("train-tinygo", requestGPUs(1))
	if n := c.waitBound("train-tinygo", 60*time.Second); n != "a100" {
		t.Fatalf("train-tinygo on %s, want a100 (binpack)", n)
	}
	c.pod("h100-tinygo", requestGPUs(1), annotate("gpu.wasmsched.io/product", "NVIDIA-H100-80GB-HBM3"))
	if msg := c.waitUnschedulable("h100-tinygo", 60*time.Second); !strings.Contains(msg, "gpu: wrong GPU product: want NVIDIA-H100-80GB-HBM3") {
		t.Fatalf("FailedScheduling %q lacks the gpu reason", msg)
	}

	// Hot reload: a policy served from ConfigMaps, replaced while the
	// scheduler runs; where a pod lands tells which version judged it.
	c.sched.Stop()
	c.namespace(policyNamespace)
	a, b := testwasm.Bytes(t, "test/guests/versions/a"), testwasm.Bytes(t, "test/guests/versions/b")
	c.node("node-a", labels("wasmsched-test/version", "a"))
	c.node("node-b", labels("wasmsched-test/version", "b"))
	digestA := c.upload("placer", a)
	restartScheduler(t, c, []policy{{Name: "placer", ConfigMap: "placer"}})
	c.waitActive("placer", digestA, 60*time.Second)
	c.pod("before-reload")
	if n := c.waitBound("before-reload", 60*time.Second); n != "node-a" {
		t.Fatalf("before-reload on %s, want node-a", n)
	}
	t.Logf("reloaded in %v", c.waitActive("placer", c.upload("placer", b), 60*time.Second))
	c.pod("after-reload")
	if n := c.waitBound("after-reload", 60*time.Second); n != "node-b" {
		t.Fatalf("after-reload on %s, want node-b", n)
	}
}

// setLabel labels a node.
func (c *cluster) setLabel(node, key, value string) {
	c.t.Helper()
	ctx := context.Background()
	n, err := c.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	n.Labels[key] = value
	if _, err := c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// logModules logs the digest of every module policies load, so that runs
// on different minors can be seen to load the same files.
func logModules(t *testing.T, policies []policy) {
	t.Helper()
	for _, p := range policies {
		path := p.File
		if path == "" {
			path = testwasm.Path(t, p.Package)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		t.Logf("policy %s: %s sha256:%s", p.Name, path, hex.EncodeToString(sum[:]))
	}
}

// EnvSkewSchedulers lists kube-scheduler binaries built for other minors
// (space-separated; make smoke passes every bin/<minor>/kube-scheduler).
const EnvSkewSchedulers = "WASMSCHED_SKEW_SCHEDULERS"

var versionLine = regexp.MustCompile(`Kubernetes v1\.(\d+)\.\d+`)

// Each kube-scheduler build, run against this minor's API server, starts
// and schedules when the version-skew policy allows it (the same minor, or
// one older) and otherwise refuses at start-up with an error naming both
// versions.
func TestSmokeSkew(t *testing.T) {
	bins := strings.Fields(os.Getenv(EnvSkewSchedulers))
	if len(bins) == 0 {
		t.Skipf("%s lists no kube-scheduler builds (make smoke sets it)", EnvSkewSchedulers)
	}
	server, _ := strconv.Atoi(strings.TrimPrefix(skew.Minor, "1."))
	c := startCluster(t, nil)
	c.node("one", nil)
	c.node("two", nil)
	config := schedulerConfig(t, t.TempDir(), c.kubeconfig, []policy{{Name: "nodepin", Package: "examples/nodepin", Settings: `{"nodes": ["two"]}`}})
	for i, bin := range bins {
		out, err := exec.Command(bin, "--version").CombinedOutput()
		m := versionLine.FindSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("%s --version: %q, %v", bin, out, err)
		}
		minor, _ := strconv.Atoi(string(m[1]))
		allowed := minor == server || minor == server-1
		t.Run(fmt.Sprintf("1.%d", minor), func(t *testing.T) {
			cmd := exec.Command(bin, "--config="+config, "--secure-port=0")
			var log lockedBuffer
			cmd.Stdout, cmd.Stderr = &log, &log
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			defer func() {
				_ = cmd.Process.Kill()
				<-done
				if t.Failed() {
					t.Logf("kube-scheduler 1.%d output:\n%s", minor, tail(log.String(), 60))
				}
			}()
			if allowed {
				pod := fmt.Sprintf("skew-%d", i)
				c.pod(pod)
				if n := c.waitBound(pod, 60*time.Second); n != "two" {
					t.Fatalf("kube-scheduler 1.%d bound %s to %s, want two", minor, pod, n)
				}
				return
			}
			select {
			case err := <-done:
				done <- err
				want := fmt.Sprintf("version skew: this kube-scheduler is built from Kubernetes 1.%d and the kube-apiserver is %s", minor, skew.Minor)
				if err == nil || !strings.Contains(log.String(), want) {
					t.Fatalf("kube-scheduler 1.%d against Kubernetes %s exited (%v) without the error %q", minor, skew.Minor, err, want)
				}
				for _, line := range strings.Split(log.String(), "\n") {
					if strings.Contains(line, want) {
						t.Logf("refused (%v): %s", err, line)
					}
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("kube-scheduler 1.%d against Kubernetes %s still running after 60s: it should refuse", minor, skew.Minor)
			}
		})
	}
}
