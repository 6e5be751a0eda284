package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// leaseName is the scheduler's leader election lease, as in manifests/.
const leaseName = "wasmsched-scheduler"

// Leader election durations: failoverLease lets a replica take over
// seconds after the leader dies; steadyLease keeps a lone leader that is
// slowed down (on a loaded machine, or by the race detector) from losing
// its lease and exiting.
var (
	failoverLease = leaseTimes{Duration: "8s", RenewDeadline: "6s", RetryPeriod: "1s"}
	steadyLease   = leaseTimes{Duration: "60s", RenewDeadline: "40s", RetryPeriod: "2s"}
)

type leaseTimes struct{ Duration, RenewDeadline, RetryPeriod string }

// electedConfig writes a scheduler configuration like schedulerConfig's,
// with leader election on (a lease in policyNamespace) and the client's
// rate limit set to qps (0 keeps kube-scheduler's default of 50).
func electedConfig(t *testing.T, kubeconfig string, policies []policy, lease leaseTimes, qps int, tweaks ...func(map[string]any)) string {
	t.Helper()
	path := schedulerConfig(t, t.TempDir(), kubeconfig, policies, tweaks...)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["leaderElection"] = map[string]any{
		"leaderElect":       true,
		"resourceLock":      "leases",
		"resourceNamespace": policyNamespace,
		"resourceName":      leaseName,
		"leaseDuration":     lease.Duration,
		"renewDeadline":     lease.RenewDeadline,
		"retryPeriod":       lease.RetryPeriod,
	}
	if qps > 0 {
		cc := cfg["clientConnection"].(map[string]any)
		cc["qps"], cc["burst"] = qps, 2*qps
	}
	if b, err = yaml.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// precompile compiles modules in the test process, as the plugin does, into
// the compilation cache that scheduler processes share with the test
// (WASMSCHED_CACHE_DIR, set by TestMain; schedulerBinary links the
// scheduler to report the test's wazero version, which keys the cache).
// The scheduler then loads them from the cache: compiling a 3 MB Go guest
// takes seconds of a loaded machine's time, and with wazero's compiler
// instrumented by the race detector (EnvRace) it took over a minute here,
// more than the plugin's start-up timeout. The compiler runs under the race
// detector in the host packages' own tests (make test).
func precompile(t *testing.T, modules ...[]byte) {
	t.Helper()
	ctx := context.Background()
	for _, wasm := range modules {
		m, err := engine.Compile(ctx, wasm, engine.Config{Name: "precompile"})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// lockedBuffer collects a process's output; it is safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// replica is a kube-scheduler process started from [schedulerBinary]. When
// that is built with the race detector (EnvRace), a data race in the host
// packages makes the process print "WARNING: DATA RACE" (at once) and exit
// 66 (at exit); [replica.stop] and the test's cleanup fail the test on
// either. Methods are safe for concurrent use.
type replica struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, set before done is closed
}

const raceWarning = "WARNING: DATA RACE"

// startReplica runs the binary with config (kube-scheduler --config) at
// verbosity 2, which logs every binding, without serving (--secure-port=0)
// unless the extra flags say otherwise.
func startReplica(t *testing.T, name, config string, extra ...string) *replica {
	t.Helper()
	return startBinary(t, schedulerBinary(t), name, config, extra...)
}

// startBinary is startReplica with a kube-scheduler binary of the caller's.
func startBinary(t *testing.T, bin, name, config string, extra ...string) *replica {
	t.Helper()
	return startBinaryEnv(t, bin, name, config, nil, extra...)
}

// startBinaryEnv is startBinary with env added to the test's environment.
func startBinaryEnv(t *testing.T, bin, name, config string, env []string, extra ...string) *replica {
	t.Helper()
	r := &replica{t: t, name: name, out: &lockedBuffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(bin, append([]string{"--config=" + config, "--secure-port=0", "--v=2"}, extra...)...)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	// The race detector's defaults (exit code 66, keep running after a
	// report), whatever the test's environment says.
	r.cmd.Env = append(append(os.Environ(), "GORACE=exitcode=66 halt_on_error=0"), env...)
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		exited := r.exited()
		if !exited && t.Failed() {
			// Still running after a failure: have the Go runtime print
			// every goroutine (SIGQUIT) before it exits, so that a wait
			// that never ended shows what the scheduler was doing.
			_ = r.cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-r.done:
			case <-time.After(30 * time.Second):
			}
		}
		select {
		case <-r.done:
		default:
			_ = r.cmd.Process.Kill()
			<-r.done
		}
		r.checkRaces()
		if t.Failed() {
			out := r.out.String()
			if exited {
				t.Logf("%s had exited before the test ended: %v", name, r.err)
			}
			log, dump := splitDump(out)
			t.Logf("%s output (last 100 lines):\n%s", name, tail(log, 100))
			if dump != "" {
				t.Logf("%s goroutines in wasmsched's code at SIGQUIT:\n%s", name, dump)
			}
		}
	})
	return r
}

// splitDump separates the goroutine dump a Go process prints when it gets
// SIGQUIT from the log before it, and keeps of the dump only the goroutines
// with a frame in wasmsched's own packages (a kube-scheduler has hundreds
// of goroutines, nearly all client-go's and the framework's).
func splitDump(out string) (log, dump string) {
	i := strings.Index(out, "SIGQUIT: quit")
	if i < 0 {
		return out, ""
	}
	var kept []string
	for _, g := range strings.Split(out[i:], "\n\n") {
		if strings.HasPrefix(g, "goroutine ") && strings.Contains(g, "github.com/wasmsched/wasmsched/") {
			kept = append(kept, g)
		}
	}
	return out[:i], strings.Join(kept, "\n\n")
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// checkRaces fails the test if the process reported a data race.
func (r *replica) checkRaces() {
	out := r.out.String()
	if i := strings.Index(out, raceWarning); i >= 0 {
		end := min(len(out), i+6000)
		r.t.Errorf("%s: the race detector reported a data race:\n%s", r.name, out[i:end])
	}
}

// exited reports whether the process has ended.
func (r *replica) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// running fails the test at once if the process has ended.
func (r *replica) running() {
	r.t.Helper()
	if r.exited() {
		r.t.Fatalf("%s exited: %v", r.name, r.err)
	}
}

// leading reports whether the replica has acquired the lease.
func (r *replica) leading() bool {
	return strings.Contains(r.out.String(), "Successfully acquired lease")
}

// kill ends the process abruptly (SIGKILL), as a crashed or evicted
// scheduler ends, without releasing its lease.
func (r *replica) kill() {
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
}

// stop asks the process to terminate (SIGTERM) and fails the test unless it
// exits with status 0: kube-scheduler exits 0 when asked to stop, the race
// detector turns that into 66 when it has reported a race. Without leader
// election upstream's command ends with the error "finished without leader
// elect" (status 1), which is a clean stop too.
func (r *replica) stop() {
	r.t.Helper()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	limit := testwasm.Patient(15 * time.Second)
	select {
	case <-r.done:
	case <-time.After(limit):
		r.t.Errorf("%s did not exit within %v of SIGTERM", r.name, limit)
		r.kill()
	}
	var exit *exec.ExitError
	switch {
	case r.err == nil:
	case errors.As(r.err, &exit) && exit.ExitCode() == 1 && strings.Contains(r.out.String(), "finished without leader elect"):
	case errors.As(r.err, &exit) && exit.ExitCode() == 66:
		r.t.Errorf("%s exited 66: the race detector found a data race", r.name)
	default:
		r.t.Errorf("%s exited with %v after SIGTERM, want status 0", r.name, r.err)
	}
	r.checkRaces()
}

var boundLine = regexp.MustCompile(`"Successfully bound pod to node" pod="([^"]+)" node="([^"]+)"`)

// bindings returns, for every pod this replica bound (namespace/name), the
// nodes its log says it bound the pod to, in order.
func (r *replica) bindings() map[string][]string {
	m := map[string][]string{}
	for _, s := range boundLine.FindAllStringSubmatch(r.out.String(), -1) {
		m[s[1]] = append(m[s[1]], s[2])
	}
	return m
}

// conflicts returns the replica's log lines about binding a pod that was
// already bound: what two replicas that both think they lead would cause.
func (r *replica) conflicts() []string {
	var lines []string
	for _, l := range strings.Split(r.out.String(), "\n") {
		if strings.Contains(l, "already assigned") {
			lines = append(lines, l)
		}
	}
	return lines
}

// waitFor polls cond every 50ms until it holds or timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	err := testwasm.Poll(t, 50*time.Millisecond, timeout, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("%s: not within %v", what, timeout)
	}
}

// waitAllBound waits until the pods named name(0..n-1) in default all have a
// node, and returns pod name -> node.
func (c *cluster) waitAllBound(n int, timeout time.Duration) map[string]string {
	c.t.Helper()
	nodes := map[string]string{}
	unbound := 0
	err := testwasm.Poll(c.t, 500*time.Millisecond, timeout, func(ctx context.Context) (bool, error) {
		c.liveRunning()
		list, err := c.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		nodes, unbound = map[string]string{}, 0
		for _, p := range list.Items {
			nodes[p.Name] = p.Spec.NodeName
			if p.Spec.NodeName == "" {
				unbound++
			}
		}
		return len(list.Items) == n && unbound == 0, nil
	})
	if err != nil {
		c.t.Fatalf("%d pods exist, %d of them unbound, after %v; want %d, all bound", len(nodes), unbound, timeout, n)
	}
	return nodes
}

// scheduledEvents counts the Scheduled events of each pod in default.
func (c *cluster) scheduledEvents() map[string]int {
	c.t.Helper()
	evs, err := c.client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=Scheduled"})
	if err != nil {
		c.t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range evs.Items {
		count := max(1, int(e.Count))
		if e.Series != nil {
			count = max(count, int(e.Series.Count))
		}
		n[e.InvolvedObject.Name] += count
	}
	return n
}

// Two replicas elect a leader; the leader is killed (SIGKILL, its lease not
// released) while pods stream in; the other replica takes over. Every pod
// is bound exactly once, to a node the policy allows: no pod is bound by
// both replicas, none is left unbound, no replica ever tried to bind a pod
// that was already bound, and neither replica hit a data race.
func TestLeaderFailover(t *testing.T) {
	c := startCluster(t, nil)
	c.namespace(policyNamespace)
	for _, n := range []string{"one", "two", "three"} {
		c.bigNode(n, nil, 0)
	}
	cfg := electedConfig(t, c.kubeconfig, []policy{{Name: "nodepin", Package: "examples/nodepin", Settings: `{"nodes": ["one", "two"]}`}}, failoverLease, 0)
	precompile(t, testwasm.Bytes(t, "examples/nodepin"))
	replicas := []*replica{startReplica(t, "replica-a", cfg), startReplica(t, "replica-b", cfg)}
	var leader, survivor *replica
	waitFor(t, "a replica acquires the lease", 120*time.Second, func() bool {
		for i, r := range replicas {
			r.running()
			if r.leading() {
				leader, survivor = r, replicas[1-i]
				return true
			}
		}
		return false
	})
	if survivor.leading() {
		t.Fatal("both replicas acquired the lease")
	}

	const pods = 300
	name := func(i int) string { return fmt.Sprintf("f-%03d", i) }
	var created atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < pods; i++ {
			c.pod(name(i))
			created.Add(1)
			time.Sleep(15 * time.Millisecond)
		}
	}()

	// Kill the leader once it has bound a third of the pods.
	waitFor(t, leader.name+" binds 100 pods", 120*time.Second, func() bool { return len(leader.bindings()) >= pods/3 })
	leader.kill()
	killed := time.Now()
	// Pods from this index on were created after the kill: only the
	// survivor can have bound them.
	after := int(created.Load()) + 1
	if after >= pods {
		t.Fatalf("all pods were created before the leader was killed")
	}
	waitFor(t, survivor.name+" acquires the lease", 60*time.Second, survivor.leading)
	c.waitBound(name(after), 60*time.Second)
	failover := time.Since(killed)
	wg.Wait()
	nodes := c.waitAllBound(pods, 120*time.Second)
	waitFor(t, survivor.name+" logs its bindings", 30*time.Second, func() bool {
		return len(survivor.bindings()) >= pods-after
	})
	events := c.scheduledEvents()
	survivor.stop()

	byLeader, bySurvivor := leader.bindings(), survivor.bindings()
	inFlight := 0
	for i := 0; i < pods; i++ {
		p := name(i)
		key := "default/" + p
		if nodes[p] != "one" && nodes[p] != "two" {
			t.Errorf("pod %s bound to %q, which the policy forbids", p, nodes[p])
		}
		l, s := byLeader[key], bySurvivor[key]
		switch {
		case len(l)+len(s) > 1:
			t.Errorf("pod %s bound more than once: by %s to %v, by %s to %v", p, leader.name, l, survivor.name, s)
		case len(l)+len(s) == 0 && i >= after:
			t.Errorf("pod %s, created after the leader was killed, is not in %s's log", p, survivor.name)
		case len(l)+len(s) == 0:
			inFlight++ // bound by the leader as it was killed, before it logged
		case len(l) == 1 && l[0] != nodes[p], len(s) == 1 && s[0] != nodes[p]:
			t.Errorf("pod %s is on %s, but the log says %v/%v", p, nodes[p], l, s)
		}
		if events[p] > 1 {
			t.Errorf("pod %s has %d Scheduled events, want at most one", p, events[p])
		}
	}
	if len(bySurvivor) == 0 {
		t.Errorf("%s bound no pod after the failover", survivor.name)
	}
	for _, r := range replicas {
		if lines := r.conflicts(); len(lines) > 0 {
			t.Errorf("%s tried to bind pods that were already bound:\n%s", r.name, strings.Join(lines, "\n"))
		}
	}
	t.Logf("%d pods: %d bound by the killed leader, %d by the new one, %d in flight at the kill; "+
		"kill to first binding of a pod created after it: %v",
		pods, len(byLeader), len(bySurvivor), inFlight, failover.Round(10*time.Millisecond))
}
