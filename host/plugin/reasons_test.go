package plugin

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/wasmsched/wasmsched/host/lifecycle"
	"github.com/wasmsched/wasmsched/host/policy"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// reasonsEntry is a policy name and the pod of a cycle, as limit takes them.
type reasonsEntry string

var reasonsPod = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}

// nodeReasons is what the probe's "manyreasons" answers for a node: 16
// distinct reasons of 1000 bytes that name it.
func nodeReasons(node string) []string {
	out := make([]string, 16)
	for i := range out {
		r := fmt.Sprintf("probe: node %s reason %02d: ", node, i)
		out[i] = r + strings.Repeat("x", 1000-len(r))
	}
	return out
}

// fitMessage is the PodScheduled condition's message the framework writes
// when no node fits, from the nodes' Filter statuses.
func fitMessage(statuses map[string]*fwk.Status) string {
	m := framework.NewDefaultNodeToStatus()
	for n, s := range statuses {
		m.Set(n, s)
	}
	return (&framework.FitError{NumAllNodes: len(statuses), Diagnosis: framework.Diagnosis{NodeToStatus: m}}).Error()
}

// shownBytes is what the distinct reasons other than the hidden-reasons line
// cost in the budget.
func shownBytes(statuses map[string]*fwk.Status) int {
	seen := map[string]bool{}
	n := 0
	for _, s := range statuses {
		for _, r := range s.Reasons() {
			if !seen[r] && !strings.HasSuffix(r, hiddenReasons) {
				n += len(r) + reasonOverhead
			}
			seen[r] = true
		}
	}
	return n
}

// 150 nodes, each rejected with 16 distinct reasons of 1000 bytes: the
// first nodes' reasons are returned whole, the others' are one line naming
// the policy, the codes are kept, and the condition message stays near the
// budget instead of 2.4 MB.
func TestReasonBudgetBoundsDistinctReasons(t *testing.T) {
	ctx := context.Background()
	var b reasonBudget
	e := reasonsEntry("gpu")
	before, after := map[string]*fwk.Status{}, map[string]*fwk.Status{}
	for i := range 150 {
		node := fmt.Sprintf("node-%03d", i)
		code := fwk.Unschedulable
		if i%2 == 1 {
			code = fwk.UnschedulableAndUnresolvable
		}
		s := fwk.NewStatus(code, nodeReasons(node)...)
		before[node] = s
		got := b.limit(ctx, reasonsPod, string(e), s)
		if got.Code() != code {
			t.Fatalf("%s: code %v, want %v", node, got.Code(), code)
		}
		after[node] = got
	}
	if n := shownBytes(after); n > MaxPodReasons {
		t.Fatalf("distinct reasons cost %d bytes, budget %d", n, MaxPodReasons)
	}
	if n := b.used.Load(); n > MaxPodReasons {
		t.Fatalf("budget used %d bytes, limit %d", n, MaxPodReasons)
	}
	// Each node's reasons cost 16 × 1008 bytes: two nodes fit whole.
	whole := MaxPodReasons / (16 * (1000 + reasonOverhead))
	for i := range 150 {
		node := fmt.Sprintf("node-%03d", i)
		rs := after[node].Reasons()
		if i < whole {
			if strings.Join(rs, "|") != strings.Join(nodeReasons(node), "|") {
				t.Errorf("%s: reasons changed, want the first nodes' reasons whole", node)
			}
			continue
		}
		if len(rs) != 1 || rs[0] != "gpu: "+hiddenReasons {
			t.Errorf("%s: reasons %.200q, want only the hidden-reasons line", node, rs)
		}
	}
	raw, msg := fitMessage(before), fitMessage(after)
	t.Logf("condition message: %d bytes without the budget, %d with it", len(raw), len(msg))
	if len(msg) > MaxPodReasons+1024 {
		t.Errorf("condition message of %d bytes, want at most the budget (%d) and a line", len(msg), MaxPodReasons)
	}
	want := fmt.Sprintf("%d gpu: node(s) rejected, reasons not shown: this pod's WasmPolicy reasons reached the 32 KiB limit (wasmsched eval shows them all)", 150-whole)
	for _, w := range []string{"0/150 nodes are available: ", want, "1 " + nodeReasons("node-000")[0]} {
		if !strings.Contains(msg, w) {
			t.Errorf("condition message lacks %.200q", w)
		}
	}
}

// A reason returned before is returned again as it is, however full the
// budget, and costs once however many nodes return it; new reasons beside it
// are replaced by one line.
func TestReasonBudgetRepeatedReasons(t *testing.T) {
	ctx := context.Background()
	var b reasonBudget
	e := reasonsEntry("gpu")
	const common = "gpu: node has no GPU"
	for range 5000 {
		s := fwk.NewStatus(fwk.UnschedulableAndUnresolvable, common)
		if got := b.limit(ctx, reasonsPod, string(e), s); got != s {
			t.Fatalf("a repeated reason changed the status: %v", got)
		}
	}
	if got, want := b.used.Load(), int64(len(common)+reasonOverhead); got != want {
		t.Fatalf("5000 nodes with one reason used %d bytes, want %d (once)", got, want)
	}
	// Fill the budget.
	for i := 0; !b.full.Load(); i++ {
		b.limit(ctx, reasonsPod, string(e), fwk.NewStatus(fwk.Unschedulable, nodeReasons(fmt.Sprintf("n%d", i))...))
	}
	s := fwk.NewStatus(fwk.UnschedulableAndUnresolvable, common)
	if got := b.limit(ctx, reasonsPod, string(e), s); got != s {
		t.Fatalf("a reason seen before was changed after the budget was spent: %v", got.Reasons())
	}
	for _, c := range []struct{ in, want []string }{
		{[]string{common, "gpu: new a", "gpu: new b"}, []string{common, "gpu: " + hiddenReasons}},
		{[]string{"gpu: new a", common}, []string{"gpu: " + hiddenReasons, common}},
	} {
		got := b.limit(ctx, reasonsPod, string(e), fwk.NewStatus(fwk.Unschedulable, c.in...))
		if strings.Join(got.Reasons(), "|") != strings.Join(c.want, "|") || got.Code() != fwk.Unschedulable {
			t.Errorf("%q after the budget was spent: %v %q, want Unschedulable %q", c.in, got.Code(), got.Reasons(), c.want)
		}
	}
	// Another policy's hidden reasons are its own line.
	got := b.limit(ctx, reasonsPod, string(reasonsEntry("zone")), fwk.NewStatus(fwk.Unschedulable, "zone: new"))
	if rs := got.Reasons(); len(rs) != 1 || rs[0] != "zone: "+hiddenReasons {
		t.Errorf("policy zone after the budget was spent: %q", rs)
	}
}

// Filter's 16 goroutines share a cycle's budget: under -race, concurrent
// verdicts never overspend it, a common reason passes every time, and every
// node keeps its code.
func TestReasonBudgetConcurrent(t *testing.T) {
	ctx := context.Background()
	var b reasonBudget
	e := reasonsEntry("gpu")
	const nodes, workers = 4000, 16
	out := make([]*fwk.Status, nodes)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < nodes; i += workers {
				code := fwk.Unschedulable
				if i%3 == 0 {
					code = fwk.UnschedulableAndUnresolvable
				}
				s := fwk.NewStatus(code, "gpu: common reason", fmt.Sprintf("gpu: node-%d: %s", i, strings.Repeat("y", 200)))
				out[i] = b.limit(ctx, reasonsPod, string(e), s)
			}
		}()
	}
	wg.Wait()
	statuses := map[string]*fwk.Status{}
	hidden := 0
	for i, s := range out {
		want := fwk.Unschedulable
		if i%3 == 0 {
			want = fwk.UnschedulableAndUnresolvable
		}
		rs := s.Reasons()
		if s.Code() != want || len(rs) != 2 || rs[0] != "gpu: common reason" {
			t.Fatalf("node %d: %v %.100q, want %v with the common reason first", i, s.Code(), rs, want)
		}
		if rs[1] == "gpu: "+hiddenReasons {
			hidden++
		}
		statuses[fmt.Sprintf("node-%d", i)] = s
	}
	if n := shownBytes(statuses); n > MaxPodReasons || int64(n) != b.used.Load() {
		t.Fatalf("distinct reasons cost %d bytes, budget used %d, limit %d", n, b.used.Load(), MaxPodReasons)
	}
	if hidden < nodes-MaxPodReasons/200 {
		t.Fatalf("%d nodes with hidden reasons, want at least %d", hidden, nodes-MaxPodReasons/200)
	}
}

// Through the plugin and the probe guest ("manyreasons"): PreFilter, then
// Filter on 16 goroutines over 150 nodes (the cycle's batch), then again on
// preemption's modified copies with a cloned cycle state (node by node):
// the reasons returned stay within the budget, the second pass returns no
// reason the first did not, and each node keeps its verdict.
func TestFilterReasonsBudget(t *testing.T) {
	ctx := context.Background()
	p, err := policy.Load(ctx, policy.Options{Name: "gpu", Wasm: testwasm.Bytes(t, "test/guests/probe"),
		Settings: []byte(`{"at": "filter", "how": "manyreasons"}`), MaxInstances: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	slot := lifecycle.NewFixedSlot(lifecycle.PolicyArgs{Name: "gpu"}, p)
	pl := fixedPlugin(slot)

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"}}
	var (
		nodes    []fwk.NodeInfo
		concrete []*framework.NodeInfo
	)
	for i := range 150 {
		ni := framework.NewNodeInfo()
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%03d", i)}})
		nodes = append(nodes, ni)
		concrete = append(concrete, ni)
	}
	cs := framework.NewCycleState()
	if _, s := pl.PreFilter(ctx, cs, pod, nodes); !s.IsSuccess() {
		t.Fatalf("PreFilter: %v", s)
	}
	filterAll := func(cs fwk.CycleState, nodes []fwk.NodeInfo) map[string]*fwk.Status {
		out := map[string]*fwk.Status{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(nodes); i += 16 {
					s := pl.Filter(ctx, cs, pod, nodes[i])
					mu.Lock()
					out[nodes[i].Node().Name] = s
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return out
	}
	first := filterAll(cs, nodes)

	// Preemption's dry runs: a modified copy of each node (another
	// generation, so the policy is called node by node) and a clone of the
	// cycle state.
	victim := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "victim", Namespace: "default", UID: "uid-victim"}}
	var copies []fwk.NodeInfo
	for _, ni := range concrete {
		c := ni.SnapshotConcrete()
		c.AddPod(victim)
		copies = append(copies, c)
	}
	second := filterAll(cs.Clone(), copies)

	seen := map[string]bool{}
	for _, s := range first {
		for _, r := range s.Reasons() {
			seen[r] = true
		}
	}
	for name, statuses := range map[string]map[string]*fwk.Status{"first pass": first, "preemption": second} {
		hidden, whole := 0, 0
		for node, s := range statuses {
			if s.Code() != fwk.Unschedulable {
				t.Fatalf("%s, %s: %v, want Unschedulable", name, node, s)
			}
			rs := s.Reasons()
			if strings.Join(rs, "|") == strings.Join(nodeReasons(node), "|") {
				whole++
			}
			if rs[len(rs)-1] == "gpu: "+hiddenReasons {
				hidden++
			}
			for _, r := range rs {
				if name == "preemption" && !seen[r] {
					t.Errorf("preemption, %s: reason %.80q was not returned by the first pass", node, r)
				}
			}
		}
		if whole+hidden != 150 || hidden < 148 {
			t.Errorf("%s: %d nodes with every reason, %d with the hidden-reasons line, want at most 2 and the rest", name, whole, hidden)
		}
		// The goroutines share the budget out among the first nodes: 32
		// reasons of 1008 bytes fit.
		if n, want := shownBytes(statuses), MaxPodReasons/(1000+reasonOverhead)*(1000+reasonOverhead); n != want {
			t.Errorf("%s: distinct reasons cost %d bytes, want %d (the budget is %d)", name, n, want, MaxPodReasons)
		}
		t.Logf("%s: condition message %d bytes, %d nodes with every reason shown", name, len(fitMessage(statuses)), whole)
	}
}
