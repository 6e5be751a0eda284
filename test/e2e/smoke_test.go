package e2e

import (
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

	"github.com/wasmsched/wasmsched/host/skew"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// The smoke suite, TestSmoke*, is what every build must do with the same
// example modules (testwasm.EnvModules, testwasm.EnvTinyGoModules, which
// make smoke points at bin/policies; the full suite builds its own):
// TestSmoke runs it with this test binary's in-process scheduler on its
// control plane (this minor's: make smoke K8S=<minor>), TestSmokeBuilds
// with each kube-scheduler binary EnvBuilds names against a control plane
// of this minor (CI: every minor's build against the default minor's).
//
// One control plane, three schedulers in turn: two composed example
// policies placing and rejecting pods, beside probes failing under
// failurePolicy Fail and Ignore; the TinyGo build of an example; a policy
// served from ConfigMaps and hot-reloaded.
func TestSmoke(t *testing.T) {
	testwasm.Claim(t)
	t.Logf("Kubernetes %s", skew.Minor)
	smokeSuite(t, startCluster(t, nil), restartScheduler)
}

// smokeScheduler stops the scheduler the smoke suite started last, if any,
// and starts one with policies.
type smokeScheduler func(t *testing.T, c *cluster, policies []policy, tweaks ...func(cfg map[string]any))

// smokeSuite is the smoke suite on c, its schedulers started by start.
func smokeSuite(t *testing.T, c *cluster, start smokeScheduler) {
	hc := hostileCaseNamed(t, "filter-panic")
	composed := []policy{
		{Name: "gpu", Package: "examples/gpu"},
		{Name: "zone", Package: "examples/zone", Settings: `{"deniedZones": ["d"]}`},
		hostileProbe(hc.name+"-fail", hc.at, hc.how, "Fail"),
		hostileProbe(hc.name+"-ignore", hc.at, hc.how, "Ignore"),
	}
	logModules(t, composed)
	gpuNode(c, "a100", "NVIDIA-A100-SXM4-80GB", "81920", 4, "topology.kubernetes.io/zone", "a")
	gpuNode(c, "l4", "NVIDIA-L4", "23034", 2, "topology.kubernetes.io/zone", "b")
	c.node("cpu-c", labels("topology.kubernetes.io/zone", "c"))
	c.node("cpu-d", labels("topology.kubernetes.io/zone", "d"))
	start(t, c, composed)

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
	// policy and the failure; under Ignore it is placed as without the
	// policy, and the skip is an Event (and, in-process, a metric).
	for _, p := range []string{hc.name + "-fail", hc.name + "-ignore"} {
		c.pod(p, label("hostile", p))
	}
	c.checkFailure(t, hc)
	if n := c.waitBound(hc.name+"-ignore", 60*time.Second); n != "cpu-c" {
		t.Fatalf("%s-ignore on %s, want cpu-c", hc.name, n)
	}

	// The TinyGo build of gpu, composed with the Go build of zone: one GPU
	// more packs a100 (one free left, l4 two).
	tiny := []policy{tinygoBuild.policy(t, "gpu", ""), composed[1]}
	logModules(t, tiny)
	start(t, c, tiny)
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
	c.namespace(policyNamespace)
	a, b := testwasm.Bytes(t, "test/guests/versions/a"), testwasm.Bytes(t, "test/guests/versions/b")
	c.node("node-a", labels("wasmsched-test/version", "a"))
	c.node("node-b", labels("wasmsched-test/version", "b"))
	digestA := c.upload("placer", a)
	start(t, c, []policy{{Name: "placer", ConfigMap: "placer"}})
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

// hostileCaseNamed returns the hostile case of that name.
func hostileCaseNamed(t *testing.T, name string) hostileCase {
	t.Helper()
	for _, hc := range hostileCases {
		if hc.name == name {
			return hc
		}
	}
	t.Fatalf("no hostile case %s", name)
	return hostileCase{}
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

// EnvBuilds lists kube-scheduler binaries, one per minor (space-separated;
// make smoke passes every bin/<minor>/kube-scheduler).
const EnvBuilds = "WASMSCHED_SMOKE_BUILDS"

var versionLine = regexp.MustCompile(`Kubernetes v1\.(\d+)\.\d+`)

// The smoke suite with each kube-scheduler build, a binary against a
// control plane of this minor. A build the version-skew policy allows (the
// same minor, or one older) runs it as it is. Any other refuses at
// start-up with an error naming both versions; an older one then runs it
// with WASMSCHED_SKEW_CHECK=warn, as an operator who knowingly runs outside
// the policy would (so CI runs every build's plugin against one control
// plane: the default minor's). A newer one stops at the refusal: it
// watches APIs an older API server does not serve (docs/compatibility.md).
func TestSmokeBuilds(t *testing.T) {
	bins := strings.Fields(os.Getenv(EnvBuilds))
	if len(bins) == 0 {
		t.Skipf("%s lists no kube-scheduler builds (make smoke sets it)", EnvBuilds)
	}
	server, _ := strconv.Atoi(strings.TrimPrefix(skew.Minor, "1."))
	for _, bin := range bins {
		out, err := exec.Command(bin, "--version").CombinedOutput()
		m := versionLine.FindSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("%s --version: %q, %v", bin, out, err)
		}
		minor, _ := strconv.Atoi(string(m[1]))
		name := fmt.Sprintf("kube-scheduler 1.%d", minor)
		t.Run(fmt.Sprintf("1.%d", minor), func(t *testing.T) {
			c := startCluster(t, nil)
			var env []string
			if minor != server && minor != server-1 {
				c.refusesSkew(t, bin, name, minor)
				if minor > server {
					return
				}
				env = []string{skew.EnvCheck + "=warn"}
			}
			smokeSuite(t, c, binaryScheduler(bin, name, env))
		})
	}
}

// refusesSkew starts the build bin (of minor) and checks that it exits at
// start-up with the version-skew error.
func (c *cluster) refusesSkew(t *testing.T, bin, name string, minor int) {
	t.Helper()
	config := schedulerConfig(t, t.TempDir(), c.kubeconfig, []policy{{Name: "nodepin", Package: "examples/nodepin"}})
	r := startBinary(t, bin, name, config)
	limit := testwasm.Patient(15 * time.Second)
	select {
	case <-r.done:
	case <-time.After(limit):
		t.Fatalf("%s against Kubernetes %s still running after %v: it should refuse", name, skew.Minor, limit)
	}
	want := fmt.Sprintf("version skew: this kube-scheduler is built from Kubernetes 1.%d and the kube-apiserver is %s", minor, skew.Minor)
	out := r.out.String()
	if r.err == nil || !strings.Contains(out, want) {
		t.Fatalf("%s against Kubernetes %s exited (%v) without the error %q", name, skew.Minor, r.err, want)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, want) {
			t.Logf("refused (%v): %s", r.err, line)
		}
	}
}

// binaryScheduler starts the smoke suite's schedulers as processes of the
// kube-scheduler binary bin, with env added to the test's environment.
func binaryScheduler(bin, name string, env []string) smokeScheduler {
	var r *replica
	return func(t *testing.T, c *cluster, policies []policy, tweaks ...func(cfg map[string]any)) {
		t.Helper()
		if r != nil {
			r.stop()
		}
		config := schedulerConfig(t, t.TempDir(), c.kubeconfig, policies, tweaks...)
		r = startBinaryEnv(t, bin, name, config, env)
		c.live = []*replica{r}
	}
}
