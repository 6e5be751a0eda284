package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/host/skew"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// schedulerBin is the kube-scheduler binary, built once per test process.
var schedulerBin struct {
	once sync.Once
	path string
	err  error
}

// EnvRace, set to 1, has schedulerBinary build the scheduler with the race
// detector (make test-e2e-race): the tests that start the binary then also
// fail on a data race the process reports (see [replica]). make test builds
// it plain, as released: the host packages run under the race detector in
// their own tests, and a race-built kube-scheduler cost a cold CI run about
// 8 minutes of compiling and made every binary test several times slower.
const EnvRace = "WASMSCHED_E2E_RACE"

// schedulerBinary returns cmd/kube-scheduler, built (with the race detector
// when EnvRace asks) by the first call (seconds from a warm build cache)
// into testwasm.SharedDir: the process's own directory, which
// testwasm.Main removes when the test process ends, or the one the
// processes running these tests side by side share (make test), where the
// first to get the lock builds it for all. Tests that need it are skipped
// with -short.
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
		flags, what := "", "kube-scheduler"
		if os.Getenv(EnvRace) == "1" {
			flags, what = "-race", "kube-scheduler -race"
		}
		build := exec.Command("make", "-s", "--no-print-directory", "build-scheduler", "SCHEDULER_OUT="+path, "SCHEDULER_FLAGS="+flags,
			"SCHEDULER_LDFLAGS=-X github.com/tetratelabs/wazero/internal/version.version="+wazeroVersion())
		build.Dir = testwasm.Root(t)
		if out, err := build.CombinedOutput(); err != nil {
			schedulerBin.err = fmt.Errorf("build %s: %v\n%s", what, err, out)
			return
		}
		if err := os.WriteFile(path+".built", nil, 0o644); err != nil {
			schedulerBin.err = err
			return
		}
		t.Logf("built %s in %v", what, time.Since(start).Round(time.Second))
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
