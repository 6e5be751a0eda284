//go:build !wasip1

package main

import (
	"context"
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/wasmsched/wasmsched/host/clusterctx"
	"github.com/wasmsched/wasmsched/host/eval"
	hostpolicy "github.com/wasmsched/wasmsched/host/policy"
	"github.com/wasmsched/wasmsched/internal/hosttest"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func TestMain(m *testing.M) { testwasm.Main(m) }

// Every test runs against the module built by each toolchain (Go and
// TinyGo), and the builds must give the same results (testwasm.Agree).
const pkg = "examples/quota"

// scene is the cluster of testdata/: nodes.yaml, the placed pods of
// pods.yaml (team-a uses 5 cores, team-b 2), the pod of testdata/<pod>
// and the objects of testdata/<objects> ("" for none).
func scene(t *testing.T, pod, objects string) eval.Input {
	t.Helper()
	in := hosttest.Input(t, "testdata/"+pod, "testdata/nodes.yaml", "testdata/pods.yaml")
	if objects != "" {
		var err error
		if in.Objects, err = eval.ReadObjects("testdata/" + objects); err != nil {
			t.Fatal(err)
		}
	}
	return in
}

// TestEvalRules applies each rule of the README through host/eval, as
// `wasmsched eval` does: the tenants' use is counted from the placed pods
// and the quotas come from the objects or the settings.
func TestEvalRules(t *testing.T) {
	const (
		overMax    = "quota: tenant team-a would exceed its max of cpu: uses 5, pod requests 2, max 6"
		tight      = "quota: tenant team-a cannot borrow cpu: uses 5, pod requests 1, min 4, other tenants' unused min 1"
		noLender   = "quota: tenant team-a cannot borrow cpu: uses 5, pod requests 1, min 4, other tenants' unused min 0"
		borrowing1 = 31 // (4+1)/8 of node-1 requested with the pod: 62% of BorrowingMax
		borrowing2 = 25 // (3+1)/8 of node-2: 50% of BorrowingMax
	)
	for _, tc := range []struct {
		name, settings, pod, objects string
		selected                     string
		want                         map[string]hosttest.Verdict
	}{
		{"over max", "", "pod-over-max.yaml", "objects.yaml", "",
			map[string]hosttest.Verdict{"node-1": hosttest.Rejected(overMax), "node-2": hosttest.Rejected(overMax)}},
		{"borrowing allowed, scored lower, fuller node first", "", "pod-borrow.yaml", "objects.yaml", "node-1",
			map[string]hosttest.Verdict{"node-1": hosttest.Passes(borrowing1), "node-2": hosttest.Passes(borrowing2)}},
		{"borrowing refused", "", "pod-borrow.yaml", "objects-tight.yaml", "",
			map[string]hosttest.Verdict{"node-1": hosttest.Rejected(tight), "node-2": hosttest.Rejected(tight)}},
		{"within min", "", "pod-guaranteed.yaml", "objects.yaml", "node-1",
			map[string]hosttest.Verdict{"node-1": hosttest.Passes(100), "node-2": hosttest.Passes(100)}},
		{"weights", `{"quotas": {"team-b": {"weight": 2}}}`, "pod-borrow.yaml", "objects.yaml", "node-1",
			map[string]hosttest.Verdict{"node-1": hosttest.Passes(15), "node-2": hosttest.Passes(12)}},
		{"settings only", hosttest.ReadFile(t, "testdata/settings.json"), "pod-borrow.yaml", "", "node-1",
			map[string]hosttest.Verdict{"node-1": hosttest.Passes(borrowing1), "node-2": hosttest.Passes(borrowing2)}},
		// red is team-a and team-b: uses 7 of min 6, max 10; the pod's 2
		// cores are borrowed from blue's unused 4.
		{"tenant label", hosttest.ReadFile(t, "testdata/tenants.json"), "pod-over-max.yaml", "objects-tenants.yaml", "node-1",
			map[string]hosttest.Verdict{"node-1": hosttest.Passes(37), "node-2": hosttest.Passes(31)}},
		// team-a's ElasticQuota (min 4) wins over its settings (min 8);
		// team-b, without one, takes its settings (min 1: lends nothing).
		{"ElasticQuota before settings", hosttest.ReadFile(t, "testdata/fallback.json"), "pod-borrow.yaml", "objects-team-a.yaml", "",
			map[string]hosttest.Verdict{"node-1": hosttest.Rejected(noLender), "node-2": hosttest.Rejected(noLender)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) *eval.Report {
				ev := hosttest.Evaluator(t, "quota", wasm, tc.settings)
				rep := hosttest.Evaluate(t, ev, scene(t, tc.pod, tc.objects))
				hosttest.CheckReport(t, rep, tc.selected, tc.want)
				if len(rep.Failures) > 0 {
					t.Fatalf("failures: %v", rep.Failures)
				}
				return rep
			})
		})
	}
}

// TestEvalQuotaChange changes team-a's ElasticQuota between cycles of one
// loaded policy, as an update seen by the scheduler's informer would: the
// next cycle applies it, without a restart; deleting it leaves team-a
// without quota.
func TestEvalQuotaChange(t *testing.T) {
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) []string {
		ev := hosttest.Evaluator(t, "quota", wasm, "")
		in := scene(t, "pod-over-max.yaml", "objects.yaml")
		var got []string
		for i, q := range [][2]string{{"6", "6"}, {"8", "8"}, {"4", "8"}, {}} {
			in.Objects = nil
			if q[0] != "" {
				in.Objects = []*unstructured.Unstructured{elasticQuota("team-a", q[0], q[1], fmt.Sprint(i+1))}
			}
			rep := hosttest.Evaluate(t, ev, in)
			got = append(got, rep.Nodes[0].Code+" "+fmt.Sprint(rep.Nodes[0].Reasons))
		}
		want := []string{
			"Unschedulable [quota: tenant team-a would exceed its max of cpu: uses 5, pod requests 2, max 6]",
			"Success []", // 7 of min 8
			// team-b has no quota: nobody lends.
			"Unschedulable [quota: tenant team-a cannot borrow cpu: uses 5, pod requests 2, min 4, other tenants' unused min 0]",
			"Success []", // no quota
		}
		if !slices.Equal(got, want) {
			t.Fatalf("verdicts\n%q\nwant\n%q", got, want)
		}
		return got
	})
}

// elasticQuota is the ElasticQuota of namespace ns with min and max cores,
// at resource version rv.
func elasticQuota(ns, min, max, rv string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
		"metadata": map[string]any{"namespace": ns, "name": "quota", "uid": "uid-quota-" + ns, "resourceVersion": rv},
		"spec":     map[string]any{"min": map[string]any{"cpu": min}, "max": map[string]any{"cpu": max}},
	}}
}

// boundPolicy is a policy loaded as the WasmPolicy plugin loads it (one
// instance), bound to an ElasticQuota store and tenant usage as the
// scheduler binds it: what the preemption tests drive.
type boundPolicy struct {
	p     *hostpolicy.Policy
	eqs   *clusterctx.Store
	usage *clusterctx.Usage
}

func newBoundPolicy(t *testing.T, wasm []byte, settings string, quotas ...*unstructured.Unstructured) *boundPolicy {
	t.Helper()
	cl := &boundPolicy{p: hosttest.Policy(t, "quota", wasm, settings), usage: clusterctx.NewUsage()}
	if kinds := cl.p.ContextKinds(); len(kinds) != 1 || kinds[0] != clusterctx.KindElasticQuota {
		t.Fatalf("the policy reads %v, want ElasticQuotas only", kinds)
	}
	cl.eqs = clusterctx.NewStore(clusterctx.KindElasticQuota)
	for _, q := range quotas {
		if err := cl.eqs.Set(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.p.Bind(&clusterctx.Binding{Stores: []*clusterctx.Store{cl.eqs}, Usage: cl.usage, Namespaces: true}); err != nil {
		t.Fatal(err)
	}
	return cl
}

// hostPod is a pod of namespace ns requesting cores, at priority prio.
func hostPod(ns, name, cores string, prio int32) *st.PodWrapper {
	return st.MakePod().Namespace(ns).Name(name).UID("uid-" + name).Priority(prio).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: cores})
}

// node is an 8-core node named name holding pods, which also count as
// their tenants' use.
func (cl *boundPolicy) node(name string, pods ...*v1.Pod) fwk.NodeInfo {
	for _, p := range pods {
		p.Spec.NodeName = name
		cl.usage.Set(p)
	}
	return hosttest.NodeInfo(st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8", v1.ResourcePods: "110"}).Obj(), pods...)
}

// show is a status as the tests compare it.
func show(s hostpolicy.Status) string {
	if s.IsSuccess() {
		return "Success"
	}
	return hostpolicy.CodeName(s.Code) + " " + fmt.Sprint(s.Reasons)
}

// TestBurstAssumedPods schedules pods of team-a back to back, each assumed (Reserve)
// before the next cycle, as the scheduler does before the binding lands:
// the host counts assumed pods in the tenant's use, so the burst stops at
// max without waiting for bindings.
func TestBurstAssumedPods(t *testing.T) {
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) []string {
		ctx := context.Background()
		cl := newBoundPolicy(t, wasm, "", elasticQuota("team-a", "4", "6", "1"), elasticQuota("team-b", "4", "6", "1"))
		n := cl.node("n1")
		var got []string
		for i := range 5 {
			p := hostPod("team-a", fmt.Sprintf("burst-%d", i), "1500m", 0).Obj()
			res, err := cl.p.PreFilter(ctx, hostpolicy.NewCycle(p, []fwk.NodeInfo{n}))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, show(res.Status))
			if res.Status.IsSuccess() {
				p.Spec.NodeName = "n1"
				cl.usage.Assume(p)
			}
		}
		want := []string{"Success", "Success", "Success", "Success",
			"Unschedulable [quota: tenant team-a would exceed its max of cpu: uses 6, pod requests 1500m, max 6]"}
		if !slices.Equal(got, want) {
			t.Fatalf("verdicts\n%q\nwant\n%q", got, want)
		}
		return got
	})
}

// TestPreemptionHooks drives the hooks the scheduler's preemption uses: Filter
// under changes (RemovePod, AddPod) and SelectVictims.
func TestPreemptionHooks(t *testing.T) {
	// outcome is what a cycle gives on n1: PreFilter's verdict, Filter's
	// under the changes, and SelectVictims' answer.
	type outcome struct{ pre, filter, victims string }
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) []outcome {
		ctx := context.Background()
		cl := newBoundPolicy(t, wasm, "", elasticQuota("team-a", "4", "6", "1"), elasticQuota("team-b", "4", "6", "1"))
		// n1 is full: team-a uses 6 cores (min 4, max 6), borrowing 2 of
		// team-b's unused min; team-b runs 2 cores.
		a1, a2, a3 := hostPod("team-a", "a1", "2", 10).Obj(), hostPod("team-a", "a2", "2", 0).Obj(), hostPod("team-a", "a3", "2", 5).Obj()
		b1 := hostPod("team-b", "b1", "2", 0).Obj()
		n := cl.node("n1", a1, a2, a3, b1)
		podInfo := func(name string) fwk.PodInfo {
			for _, pi := range n.GetPods() {
				if pi.GetPod().Name == name {
					return pi
				}
			}
			t.Fatalf("no pod %s on n1", name)
			return nil
		}
		var got []outcome
		run := func(p *v1.Pod, changes ...hostpolicy.PodChange) outcome {
			t.Helper()
			c := hostpolicy.NewCycle(p, []fwk.NodeInfo{n})
			res, err := cl.p.PreFilter(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			s, err := cl.p.FilterChanged(ctx, c, n, changes)
			if err != nil {
				t.Fatal(err)
			}
			victims, vs, err := cl.p.SelectVictims(ctx, c, n)
			if err != nil {
				t.Fatal(err)
			}
			o := outcome{show(res.Status), show(s), fmt.Sprint(victims) + " " + show(vs)}
			got = append(got, o)
			return o
		}
		check := func(what, got, want string) {
			t.Helper()
			if got != want {
				t.Errorf("%s: %s\nwant %s", what, got, want)
			}
		}
		over := "Unschedulable [quota: tenant team-a would exceed its max of cpu: uses 6, pod requests 2, max 6]"
		removed := func(name string) hostpolicy.PodChange { return hostpolicy.PodChange{Removed: true, Pod: podInfo(name)} }

		// Within a tenant: team-a at its max passes on n1 once a pod of its
		// own is removed, not when team-b's is, nor when it is put back;
		// it may evict only its own lower-priority pods, the lowest first.
		a4 := hostPod("team-a", "a4", "2", 6).Obj()
		o := run(a4, removed("a2"))
		check("a4 PreFilter", o.pre, over)
		check("a4 Filter without a2", o.filter, "Success")
		check("a4 victims", o.victims, "[uid-a2] Success")
		check("a4 Filter without b1", run(a4, removed("b1")).filter, over)
		check("a4 Filter with a2 put back", run(a4, removed("a2"), hostpolicy.PodChange{Pod: podInfo("a2")}).filter, over)
		check("victims of a pod of the lowest priority", run(hostPod("team-a", "low", "2", 0).Obj()).victims,
			"[] Unschedulable [quota: evicting lower-priority pods of tenant team-a on node n1 cannot free cpu 2]")

		// Across tenants: team-b, within its min, reclaims what team-a
		// borrows, whatever the priorities, and no more than the pod needs.
		o = run(hostPod("team-b", "b2", "2", 0).Obj())
		check("b2", o.pre+", "+o.filter+", "+o.victims, "Success, Success, [uid-a2] Success")
		// A pod that would take team-b above its min borrows: it may evict
		// only team-b's pods of lower priority, and b1's is not lower.
		check("b3 victims", run(hostPod("team-b", "b3", "4", 0).Obj()).victims,
			"[] Unschedulable [quota: evicting lower-priority pods of tenant team-b on node n1 cannot free cpu 4]")
		return got
	})
}

func TestEvalRejectsBadSettings(t *testing.T) {
	hosttest.RejectsSettings(t, pkg, "quota", []hosttest.BadSettings{
		{Settings: `{"quotas": {"t": {"weight": 1001}}}`, Want: `"quotas.t.weight" must be 1 to 1000, got 1001`},
		{Settings: `{"quotas": {"t": {"min": {"cpu": "lots"}}}}`, Want: `"quotas.t.min.cpu" is not a non-negative quantity`},
		{Settings: `{"quotas": {"t": {"min": {"cpu": 4}, "max": {"cpu": 2}}}}`, Want: `min cpu 4 exceeds max 2`},
		{Settings: `{"tenantLable": "x"}`, Want: `unknown field "tenantLable"`},
	})
}
