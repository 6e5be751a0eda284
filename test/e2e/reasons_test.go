package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/host/plugin"
)

// A policy rejects each of 150 nodes with 16 distinct reasons of 1000 bytes
// (the probe's "manyreasons"): 2.4 MB of reasons, which as the pod's
// PodScheduled condition the API server refused, so the pod showed no
// reason. With the per-pod budget the condition is written: it holds the
// first reasons whole and one line counting the nodes whose reasons are not
// shown, and stays within the budget plus the framework's own text. Other
// pods are scheduled through the same policy.
func TestPodReasonsFitTheAPIServer(t *testing.T) {
	c := startCluster(t, []policy{{Name: "manyreasons", Package: "test/guests/probe",
		Settings: `{"at": "filter", "how": "manyreasons", "when": "reasons=many"}`, Timeout: "5s"}})
	const nodes = 150
	for i := range nodes {
		c.node(fmt.Sprintf("reasons-%03d", i), nil)
	}
	c.pod("many", label("reasons", "many"))
	c.pod("ordinary")
	c.waitBound("ordinary", 60*time.Second)

	hidden := "manyreasons: node(s) rejected, reasons not shown: this pod's WasmPolicy reasons reached the 32 KiB limit (wasmsched eval shows them all)"
	msg := c.waitCondition(t, "many", 120*time.Second, "0/150 nodes are available: ", hidden)
	t.Logf("condition message: %d bytes: %s", len(msg), regexp.MustCompile(`x{10,}`).ReplaceAllString(msg, "xxx..."))
	// The framework adds its header, a count and a separator per reason
	// (charged in the budget), the hidden-reasons line and preemption's
	// summary ("preemption: 0/150 nodes are available: 150 No preemption
	// victims found for incoming pod.").
	if limit := plugin.MaxPodReasons + 1024; len(msg) > limit {
		t.Errorf("condition message of %d bytes, want at most %d", len(msg), limit)
	}
	// The reasons shown are whole first reasons of some nodes: 32 of 1008
	// bytes (reason and overhead) fit in 32 KiB.
	shown := regexp.MustCompile(`1 probe: node reasons-\d{3} reason \d{2}: x{900,}`).FindAllString(msg, -1)
	if want := plugin.MaxPodReasons / 1008; len(shown) != want {
		t.Errorf("%d reasons shown, want %d", len(shown), want)
	}
	// The hidden-reasons line counts every node not shown whole (at most
	// two are).
	m := regexp.MustCompile(`(\d+) ` + regexp.QuoteMeta(hidden)).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("no count before the hidden-reasons line in %.300q", msg)
	}
	if n, _ := strconv.Atoi(m[1]); n < nodes-2 || n > nodes {
		t.Errorf("the hidden-reasons line counts %d nodes, want %d to %d", n, nodes-2, nodes)
	}
	if strings.Count(msg, hidden) != 1 {
		t.Errorf("the hidden-reasons line is printed %d times, want once", strings.Count(msg, hidden))
	}
}
