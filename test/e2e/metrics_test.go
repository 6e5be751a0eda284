package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/wasmsched/wasmsched/host/plugin"
	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// Every metric the operator's guide lists is on a running scheduler's
// /metrics with a value, and every wasmsched metric there is listed. One
// scheduler runs the scenarios that make each labelled series appear: an
// enforcing policy reloaded from its file, a shadow that disagrees with it
// on one node, and a policy that fails with failurePolicy Ignore for one pod
// (a skip). Only series of this test's policies count: the in-process
// scheduler shares the test binary's registry with other tests.
func TestDocumentedMetrics(t *testing.T) {
	testwasm.Claim(t)
	documented := documentedMetrics(t)
	if len(documented) < 10 {
		t.Fatalf("found %d metrics in the operator's guide (%v): is its table still where documentedMetrics looks?", len(documented), documented)
	}

	probe := testwasm.Bytes(t, "test/guests/probe")
	enforceFile := filepath.Join(t.TempDir(), "enforce.wasm")
	if err := os.WriteFile(enforceFile, probe, 0o644); err != nil {
		t.Fatal(err)
	}
	ours := []string{"m-enforce", "m-shadow", "m-ignore"}
	c := startCluster(t, nil)
	port := freePort(t)
	startServingScheduler(t, c, port, []policy{
		{Name: "m-enforce", File: enforceFile, Settings: `{}`},
		{Name: "m-shadow", Package: "test/guests/probe", Settings: `{"rejectLabel": "no-shadow"}`, Mode: "Shadow", Shadows: "m-enforce"},
		{Name: "m-ignore", Package: "test/guests/probe", Settings: `{"at": "filter", "how": "panic", "when": "fail=yes"}`, FailurePolicy: "Ignore"},
	})

	// A new version of m-enforce (same behaviour, another digest): a reload.
	if err := os.WriteFile(enforceFile+".new", withVersion(probe, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(enforceFile+".new", enforceFile); err != nil {
		t.Fatal(err)
	}
	c.node("n1", nil)
	c.node("n2", labels("no-shadow", ""))
	c.pod("plain")
	c.pod("fails", label("fail", "yes"))
	c.waitBound("plain", 30*time.Second)
	c.waitBound("fails", 30*time.Second) // m-ignore skipped

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	url := fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
	token := c.cp.RestConfig().BearerToken
	var missing []string
	// 15 s on a quiet machine; Patience times that on a loaded one.
	limit := testwasm.Patient(15 * time.Second)
	deadline := time.Now().Add(limit)
	for {
		samples := scrape(t, client, url, token)
		missing = nil
		for _, name := range documented {
			// Per profile, not per policy, and only once pods were
			// retried by a policy change (host/plugin's
			// TestSwapRequeuesOnlyItsRejections reads it).
			if name == "wasmsched_requeued_pods_total" {
				continue
			}
			if !samples.has(name, ours) {
				missing = append(missing, name)
			}
		}
		for _, want := range []struct {
			name, policy string
			labels       []string
		}{
			{"wasmsched_policy_reloads_total", "m-enforce", []string{`result="success"`}}, // the first version
			{"wasmsched_policy_skips_total", "m-ignore", []string{`point="filter"`, `kind="trap"`}},
			{"wasmsched_shadow_disagreements_total", "m-enforce", []string{`shadow="m-shadow"`}},
		} {
			if samples.sum(want.name, want.policy, want.labels...) < 1 {
				missing = append(missing, fmt.Sprintf("%s{policy=%q,%s} >= 1", want.name, want.policy, strings.Join(want.labels, ",")))
			}
		}
		if samples.sum("wasmsched_policy_reloads_total", "m-enforce", `result="success"`) < 2 {
			missing = append(missing, `wasmsched_policy_reloads_total{policy="m-enforce",result="success"} >= 2 (the reload)`)
		}
		if samples.sum("wasmsched_policy_instances", "m-enforce") < 1 {
			missing = append(missing, `wasmsched_policy_instances{policy="m-enforce"} >= 1`)
		}
		var undocumented []string
		for _, name := range samples.families() {
			if !slices.Contains(documented, name) {
				undocumented = append(undocumented, name)
			}
		}
		if len(undocumented) > 0 {
			t.Fatalf("on /metrics but not in the operator's guide: %v", undocumented)
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not on /metrics for policies %v within %v:\n  %s\n/metrics has:\n%s", ours, limit, strings.Join(missing, "\n  "), samples.wasmsched())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// documentedMetrics returns the metric names in the first column of the
// operator's guide's metrics table.
func documentedMetrics(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testwasm.Root(t), "docs", "operators-guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile("`(wasmsched_[a-z0-9_]+)`")
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`wasmsched_") {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cells[1], -1) {
			if !slices.Contains(names, m[1]) {
				names = append(names, m[1])
			}
		}
	}
	return names
}

// startServingScheduler starts an in-process scheduler for c with
// policies, as restartScheduler does, serving /healthz and /metrics on
// port of 127.0.0.1 (requests authenticated by the API server: the admin
// token works).
func startServingScheduler(t *testing.T, c *cluster, port int, policies []policy) {
	t.Helper()
	c.config = schedulerConfig(t, t.TempDir(), c.kubeconfig, policies)
	s, err := controlplane.StartScheduler(context.Background(), controlplane.SchedulerOptions{
		Kubeconfig:      c.kubeconfig,
		ConfigFile:      c.config,
		RegistryOptions: []app.Option{app.WithPlugin(plugin.Name, plugin.New)},
		SecurePort:      port,
	})
	if err != nil {
		t.Fatalf("scheduler: %v", err)
	}
	c.sched = s
	t.Cleanup(s.Stop)
}

// exposition is what /metrics showed of the wasmsched metrics: the
// samples, by line, and the names of the histograms.
type exposition struct {
	samples    []sample
	histograms []string
}

// sample is one line: name, labels as written ({a="x",b="y"}) and value.
type sample struct {
	name, labels string
	value        float64
}

// scrape fetches url with token and parses the samples of wasmsched
// metrics. A sample whose value is not a number fails the test.
func scrape(t *testing.T, client *http.Client, url, token string) exposition {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	var out exposition
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" && f[3] == "histogram" {
			out.histograms = append(out.histograms, f[2])
		}
		if !strings.HasPrefix(line, "wasmsched_") {
			continue
		}
		var s sample
		rest := line
		if i := strings.IndexAny(line, "{ "); i >= 0 && line[i] == '{' {
			j := strings.LastIndex(line, "}")
			s.name, s.labels, rest = line[:i], line[i:j+1], strings.TrimSpace(line[j+1:])
		} else if i >= 0 {
			s.name, rest = line[:i], strings.TrimSpace(line[i:])
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil || math.IsNaN(v) {
			t.Fatalf("/metrics line %q: value not a number", line)
		}
		s.value = v
		out.samples = append(out.samples, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// matches reports whether s belongs to metric name (a histogram's samples
// are its _bucket, _sum and _count) and carries every label given.
func (s sample) matches(name string, labels ...string) bool {
	if s.name != name && s.name != name+"_bucket" && s.name != name+"_sum" && s.name != name+"_count" {
		return false
	}
	for _, l := range labels {
		if !strings.Contains(s.labels, l) {
			return false
		}
	}
	return true
}

// has reports whether metric name has a sample of one of the policies.
func (e exposition) has(name string, policies []string) bool {
	for _, s := range e.samples {
		for _, p := range policies {
			if s.matches(name, fmt.Sprintf("policy=%q", p)) {
				return true
			}
		}
	}
	return false
}

// sum adds the values of metric name's samples of policy with labels (a
// histogram's _count only).
func (e exposition) sum(name, policy string, labels ...string) float64 {
	total := 0.0
	for _, s := range e.samples {
		if (s.name == name || s.name == name+"_count") && s.matches(name, append(labels, fmt.Sprintf("policy=%q", policy))...) {
			total += s.value
		}
	}
	return total
}

// families returns the metric names present, a histogram's under its own
// name.
func (e exposition) families() []string {
	var names []string
	for _, s := range e.samples {
		name := s.name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(e.histograms, base) {
				name = base
			}
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// wasmsched lists the samples but histogram buckets, for a failure.
func (e exposition) wasmsched() string {
	var b strings.Builder
	for _, s := range e.samples {
		if strings.HasSuffix(s.name, "_bucket") {
			continue
		}
		fmt.Fprintf(&b, "  %s%s %v\n", s.name, s.labels, s.value)
	}
	return b.String()
}
