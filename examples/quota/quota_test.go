package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
	"github.com/wasmsched/wasmsched/guest/guesttest"
)

// cluster is what a test's cycle sees beyond the pod and nodes: cluster
// objects (YAML, as `wasmsched eval --objects` reads them) and tenant usage
// per namespace.
type cluster struct {
	objects []string
	usage   map[string]map[string]int64 // namespace -> "cpu" -> millicores
}

// eq is an ElasticQuota of namespace ns with min and max given as YAML
// flow maps ("{cpu: 4}"), at resource version rv.
func eq(ns, min, max, rv string) string {
	return `apiVersion: scheduling.x-k8s.io/v1alpha1
kind: ElasticQuota
metadata: {name: quota, namespace: ` + ns + `, resourceVersion: "` + rv + `"}
spec: {min: ` + min + `, max: ` + max + `}`
}

// namespace is a Namespace with the label tenant=<tenant> ("" for none).
func namespace(name, tenant string) string {
	labels := "{}"
	if tenant != "" {
		labels = "{tenant: " + tenant + "}"
	}
	return "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + name + ", labels: " + labels + "}"
}

// podIn is pod name of namespace ns requesting cpu millicores.
func podIn(ns, name string, milliCPU int64) *guesttest.PodWrapper {
	return guesttest.MakePod().Namespace(ns).Name(name).UID("uid-" + ns + "-" + name).Req(map[string]int64{"cpu": milliCPU})
}

// node is a node with 8 cores, of which requested are requested.
func node(name string, requested int64, pods ...*abiv1.PodSummary) *guest.NodeInfo {
	return guesttest.MakeNode().Name(name).Allocatable(map[string]int64{"cpu": 8000, "pods": 110}).
		Requested(map[string]int64{"cpu": requested}).Pods(pods...).Obj()
}

// mustParse builds the policy from settings as the Settings hook does.
func mustParse(t *testing.T, raw string) *Policy {
	t.Helper()
	return guesttest.Load(t, raw, DefaultSettings(), New)
}

// start starts a cycle of pod over nodes that reads cl as an instance of
// the policy does (the objects of the kinds p reads, synced by the host),
// and runs PreFilter, returning the cycle and PreFilter's verdict.
func start(t *testing.T, p *Policy, cl cluster, pod *guest.Pod, nodes ...*guest.NodeInfo) (*guest.Cycle, guest.Status) {
	t.Helper()
	mc := guesttest.MakeCluster()
	for _, o := range cl.objects {
		mc.Object(o)
	}
	for ns, u := range cl.usage {
		mc.Usage("", ns, map[string]string{"cpu": strconv.FormatInt(u["cpu"], 10) + "m"}, 1)
	}
	c := mc.Cycle(pod, p.Kinds(), nodes...)
	return c, p.PreFilter(c)
}

// twoTeams is the scene of most tests: team-a (min 4, max 6 cores) and
// team-b (min 4, max 6) by ElasticQuota, team-c without quota.
var twoTeams = []string{eq("team-a", "{cpu: 4}", "{cpu: 6}", "1"), eq("team-b", "{cpu: 4}", "{cpu: 6}", "1")}

func usage(kv ...any) map[string]map[string]int64 {
	m := map[string]map[string]int64{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = map[string]int64{"cpu": kv[i+1].(int64)}
	}
	return m
}

func TestSettings(t *testing.T) {
	p := mustParse(t, "")
	if p.tenantLabel != "" || !p.readEQ || len(p.configured) != 0 || p.maxWeight != 1 {
		t.Fatalf("defaults: %+v", p)
	}
	if got := p.Kinds(); !slices.Equal(got, []guest.Kind{KindElasticQuota}) {
		t.Errorf("default kinds %v", got)
	}
	p = mustParse(t, `{"tenantLabel": "tenant", "elasticQuotas": false,
		"quotas": {"t1": {"min": {"cpu": "500m", "memory": "1Gi"}, "max": {"cpu": 2}, "weight": 3}, "t2": {"weight": 2}}}`)
	if got := p.Kinds(); !slices.Equal(got, []guest.Kind{guest.KindNamespace}) {
		t.Errorf("kinds %v", got)
	}
	want := []bound{{"cpu", 500, 2000}, {"memory", 1 << 30, unlimited}}
	if q := p.configured["t1"]; q == nil || !slices.Equal(q.bounds, want) {
		t.Errorf("t1 quota %+v, want %+v", q, want)
	}
	if p.configured["t2"] != nil || p.weight("t1") != 3 || p.weight("t2") != 2 || p.weight("t3") != 1 || p.maxWeight != 3 {
		t.Errorf("weights: %+v", p)
	}
	if got := mustParse(t, `{"tenantLabel": "tenant"}`).Kinds(); !slices.Equal(got, []guest.Kind{KindElasticQuota, guest.KindNamespace}) {
		t.Errorf("kinds with a tenant label %v", got)
	}
	for _, tc := range []struct{ raw, want string }{
		{`{"quotas": {"t": {"weight": -1}}}`, `"quotas.t.weight" must be 1 to 1000, got -1`},
		{`{"quotas": {"t": {"weight": 1001}}}`, `"quotas.t.weight" must be 1 to 1000`},
		{`{"quotas": {"t": {"min": {"cpu": "lots"}}}}`, `"quotas.t.min.cpu" is not a non-negative quantity: "lots"`},
		{`{"quotas": {"t": {"max": {"memory": "-1Gi"}}}}`, `"quotas.t.max.memory" is not a non-negative quantity`},
		{`{"quotas": {"t": {"min": {"cpu": 4}, "max": {"cpu": 2}}}}`, `"quotas.t": min cpu 4 exceeds max 2`},
		{`{"quotas": {"": {"weight": 2}}}`, `"quotas" has an empty tenant name`},
		{`{"tenantLable": "x"}`, `unknown field "tenantLable"`},
	} {
		_, err := guest.Load([]byte(tc.raw), DefaultSettings(), New)
		if err == nil || !strings.HasPrefix(err.Error(), "settings: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("guest.Load(%s) = %v, want an error containing %q", tc.raw, err, tc.want)
		}
	}
}

func TestMax(t *testing.T) {
	p := mustParse(t, "")
	cl := cluster{objects: twoTeams, usage: usage("team-a", int64(5000))}
	_, s := start(t, p, cl, podIn("team-a", "big", 2000).Obj())
	guesttest.CheckStatus(t, s, guest.Reject("quota: tenant team-a would exceed its max of cpu: uses 5, pod requests 2, max 6"))
	_, s = start(t, p, cl, podIn("team-a", "small", 1000).Obj())
	guesttest.CheckStatus(t, s, guest.OK())
	// A namespace without quota is not limited.
	_, s = start(t, p, cl, podIn("team-c", "any", 64000).Obj())
	guesttest.CheckStatus(t, s, guest.OK())
}

// TestBurst schedules pods of one tenant back to back: the usage the host
// syncs counts the pods it has assumed (reserved, not yet bound), so every
// cycle sees the ones before it, and the burst stops at max.
func TestBurst(t *testing.T) {
	p := mustParse(t, `{"elasticQuotas": false, "quotas": {"team-a": {"min": {"cpu": 4}, "max": {"cpu": 6}}, "team-b": {"min": {"cpu": 4}}}}`)
	var used int64
	var verdicts []string
	for i := range 5 {
		_, s := start(t, p, cluster{usage: usage("team-a", used)}, podIn("team-a", "burst-"+string(rune('0'+i)), 1500).Obj())
		verdicts = append(verdicts, s.Code.String())
		if s.IsSuccess() {
			used += 1500 // the pod is assumed: the next sync counts it
		}
	}
	if want := []string{"Success", "Success", "Success", "Success", "Unschedulable"}; !slices.Equal(verdicts, want) {
		t.Fatalf("verdicts %v, want %v", verdicts, want)
	}
	if used != 6000 {
		t.Fatalf("used %d, want 6000", used)
	}
}

func TestBorrowing(t *testing.T) {
	p := mustParse(t, "")
	for _, tc := range []struct {
		name  string
		usage map[string]map[string]int64
		pod   *guest.Pod
		want  guest.Status
	}{{
		name:  "within min",
		usage: usage("team-a", int64(2000), "team-b", int64(4000)),
		pod:   podIn("team-a", "p", 2000).Obj(),
		want:  guest.OK(),
	}, {
		name:  "borrowing covered by team-b's unused min",
		usage: usage("team-a", int64(4000), "team-b", int64(2000)),
		pod:   podIn("team-a", "p", 2000).Obj(),
		want:  guest.OK(),
	}, {
		name:  "partly within min, the rest covered",
		usage: usage("team-a", int64(3000), "team-b", int64(3000)),
		pod:   podIn("team-a", "p", 2000).Obj(),
		want:  guest.OK(),
	}, {
		name:  "team-b uses its min: nothing to borrow",
		usage: usage("team-a", int64(4000), "team-b", int64(4000)),
		pod:   podIn("team-a", "p", 1000).Obj(),
		want:  guest.Reject("quota: tenant team-a cannot borrow cpu: uses 4, pod requests 1, min 4, other tenants' unused min 0"),
	}, {
		name:  "team-b's unused min covers less than the pod borrows",
		usage: usage("team-a", int64(4000), "team-b", int64(3500)),
		pod:   podIn("team-a", "p", 1000).Obj(),
		want:  guest.Reject("quota: tenant team-a cannot borrow cpu: uses 4, pod requests 1, min 4, other tenants' unused min 500m"),
	}, {
		name:  "what team-b lends is already borrowed by team-c",
		usage: usage("team-a", int64(4000), "team-b", int64(2000), "team-c", int64(6000)),
		pod:   podIn("team-a", "p", 1000).Obj(),
		want:  guest.Reject("quota: tenant team-a cannot borrow cpu: uses 4, pod requests 1, min 4, other tenants' unused min 0"),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			objs := append(slices.Clone(twoTeams), eq("team-c", "{}", "{cpu: 8}", "1"))
			_, s := start(t, p, cluster{objects: objs, usage: tc.usage}, tc.pod)
			guesttest.CheckStatus(t, s, tc.want)
		})
	}
}

// scores runs Score on every node.
func scores(t *testing.T, p *Policy, c *guest.Cycle, nodes ...*guest.NodeInfo) []int64 {
	t.Helper()
	var out []int64
	for _, n := range nodes {
		v, s := p.Score(c, n)
		if !s.IsSuccess() || v < 0 || v > 100 {
			t.Fatalf("Score(%s) = %d, %+v", n.Name(), v, s)
		}
		out = append(out, v)
	}
	return out
}

func TestScore(t *testing.T) {
	nodes := []*guest.NodeInfo{node("empty", 0), node("half", 4000), node("full", 6000)}
	cl := cluster{objects: twoTeams, usage: usage("team-a", int64(4000), "team-b", int64(4000), "team-c", int64(0))}
	cl.objects = []string{eq("team-a", "{cpu: 4}", "{cpu: 8}", "1"), eq("team-b", "{cpu: 8}", "{cpu: 8}", "1")}
	for _, tc := range []struct {
		name     string
		settings string
		pod      *guest.Pod
		want     []int64
	}{
		{"guaranteed pod: 100 everywhere", "", podIn("team-b", "g", 2000).Obj(), []int64{100, 100, 100}},
		{"pod without quota: 100 everywhere", "", podIn("team-c", "u", 2000).Obj(), []int64{100, 100, 100}},
		// (0+2)/8=25%, (4+2)/8=75%, (6+2)/8=100% of 50.
		{"borrowing pod packs, below guaranteed", "", podIn("team-a", "b", 2000).Obj(), []int64{12, 37, 50}},
		{"a lighter tenant's borrowing scores less", `{"quotas": {"team-b": {"weight": 4}}}`, podIn("team-a", "b", 2000).Obj(), []int64{3, 9, 12}},
		{"the heaviest tenant keeps the full range", `{"quotas": {"team-a": {"weight": 4}, "team-b": {"weight": 2}}}`, podIn("team-a", "b", 2000).Obj(), []int64{12, 37, 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustParse(t, tc.settings)
			c, s := start(t, p, cl, tc.pod, nodes...)
			guesttest.CheckStatus(t, s, guest.OK())
			if got := scores(t, p, c, nodes...); !slices.Equal(got, tc.want) {
				t.Fatalf("scores %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTenantLabel(t *testing.T) {
	p := mustParse(t, `{"tenantLabel": "tenant", "quotas": {"blue": {"min": {"cpu": 2}, "max": {"cpu": 4}}}}`)
	objs := []string{
		namespace("red-dev", "red"), namespace("red-prod", "red"), namespace("blue-1", "blue"), namespace("loose", ""),
		// red's quota is the sum of its namespaces' ElasticQuotas: min 4, max 6.
		eq("red-dev", "{cpu: 1}", "{cpu: 2}", "1"), eq("red-prod", "{cpu: 3}", "{cpu: 4}", "1"),
		// An ElasticQuota in an unlabelled namespace belongs to no tenant.
		eq("loose", "{cpu: 100}", "{cpu: 100}", "1"),
	}
	// red uses 2 + 3 cores over its two namespaces; blue 1 of its min 2.
	cl := cluster{objects: objs, usage: usage("red-dev", int64(2000), "red-prod", int64(3000), "blue-1", int64(1000), "loose", int64(50000))}
	_, s := start(t, p, cl, podIn("red-dev", "p", 2000).Obj())
	guesttest.CheckStatus(t, s, guest.Reject("quota: tenant red would exceed its max of cpu: uses 5, pod requests 2, max 6"))
	// red would borrow 2 cores (6 of its min 4); blue leaves 1 of its min
	// unused.
	_, s = start(t, p, cl, podIn("red-prod", "p", 1000).Obj())
	guesttest.CheckStatus(t, s, guest.Reject("quota: tenant red cannot borrow cpu: uses 5, pod requests 1, min 4, other tenants' unused min 1"))
	_, s = start(t, p, cl, podIn("blue-1", "p", 1000).Obj())
	guesttest.CheckStatus(t, s, guest.OK())
	_, s = start(t, p, cl, podIn("loose", "p", 1000).Obj())
	guesttest.CheckStatus(t, s, guest.OK())
	// Blue's min is all unused once its pod is gone: red may borrow 2.
	cl.usage = usage("red-dev", int64(2000), "red-prod", int64(3000))
	_, s = start(t, p, cl, podIn("red-prod", "p", 1000).Obj())
	guesttest.CheckStatus(t, s, guest.OK())
	// The unlabelled namespace joins red, its ElasticQuota unchanged: red's
	// min and max grow by 100 cores, and the pod over its max of 6 fits.
	objs[3] = namespace("loose", "red")
	cl = cluster{objects: objs, usage: usage("red-dev", int64(2000), "red-prod", int64(3000), "blue-1", int64(1000))}
	_, s = start(t, p, cl, podIn("red-dev", "p", 2000).Obj())
	guesttest.CheckStatus(t, s, guest.OK())
}

// TestQuotaChange changes an ElasticQuota between cycles of one instance:
// the next cycle uses the new amounts, and settings apply only to tenants
// without an ElasticQuota.
func TestQuotaChange(t *testing.T) {
	p := mustParse(t, `{"quotas": {"team-a": {"max": {"cpu": 1}}}}`)
	cl := cluster{usage: usage("team-a", int64(5000))}
	pod := podIn("team-a", "p", 2000).Obj()
	_, s := start(t, p, cl, pod)
	guesttest.CheckStatus(t, s, guest.Reject("quota: tenant team-a would exceed its max of cpu: uses 5, pod requests 2, max 1"))
	cl.objects = []string{eq("team-a", "{cpu: 8}", "{cpu: 8}", "1")}
	_, s = start(t, p, cl, pod)
	guesttest.CheckStatus(t, s, guest.OK())
	cl.objects = []string{eq("team-a", "{cpu: 4}", "{cpu: 6}", "2")}
	_, s = start(t, p, cl, pod)
	guesttest.CheckStatus(t, s, guest.Reject("quota: tenant team-a would exceed its max of cpu: uses 5, pod requests 2, max 6"))
	cl.objects = []string{eq("team-a", "{cpu: lots}", "{cpu: 6}", "3")}
	_, s = start(t, p, cl, pod)
	guesttest.CheckStatus(t, s, guest.Errorf("quota: ElasticQuota team-a/quota: spec.min.cpu is not a non-negative quantity"))
}

// TestFilterUnderChanges follows the scheduler's preemption simulation: a
// pod of a tenant at max passes on a node once a pod of its tenant is
// removed there, and a nominated pod of its tenant added counts.
func TestFilterUnderChanges(t *testing.T) {
	p := mustParse(t, "")
	n := node("n1", 8000)
	cl := cluster{objects: twoTeams, usage: usage("team-a", int64(6000), "team-b", int64(0))}
	pod := podIn("team-a", "p", 2000).Obj()
	c, s := start(t, p, cl, pod, n)
	over := guest.Reject("quota: tenant team-a would exceed its max of cpu: uses 6, pod requests 2, max 6")
	guesttest.CheckStatus(t, s, over)
	guesttest.CheckStatus(t, p.Filter(c, n), over)

	// As the SDK does for a Filter under changes: PreFilter again, then the
	// changes, then Filter.
	simulate := func(changes ...*abiv1.PodChange) guest.Status {
		sc, _ := start(t, p, cl, pod, n)
		for _, ch := range changes {
			hook := p.AddPod
			if ch.Removed {
				hook = p.RemovePod
			}
			if s := hook(sc, ch.Pod, n); !s.IsSuccess() {
				return s
			}
		}
		return p.Filter(sc, n)
	}
	victim := podIn("team-a", "low", 2000).Placed()
	other := podIn("team-b", "b", 2000).Placed()
	guesttest.CheckStatus(t, simulate(&abiv1.PodChange{Removed: true, Pod: victim}), guest.OK())
	guesttest.CheckStatus(t, simulate(&abiv1.PodChange{Removed: true, Pod: other}), over)
	guesttest.CheckStatus(t, simulate(&abiv1.PodChange{Removed: true, Pod: victim}, &abiv1.PodChange{Pod: victim}), over)

	// Under its max, a nominated pod of the tenant added to the node counts.
	cl.usage = usage("team-a", int64(3000))
	guesttest.CheckStatus(t, simulate(), guest.OK())
	guesttest.CheckStatus(t, simulate(&abiv1.PodChange{Pod: podIn("team-a", "nominated", 2000).Placed()}),
		guest.Reject("quota: tenant team-a would exceed its max of cpu: uses 5, pod requests 2, max 6"))
}

// withPriority sets a placed pod's priority.
func withPriority(s *abiv1.PodSummary, prio int32) *abiv1.PodSummary { s.Priority = prio; return s }

func TestSelectVictims(t *testing.T) {
	p := mustParse(t, "")
	objs := append(slices.Clone(twoTeams), eq("team-c", "{cpu: 1}", "{cpu: 8}", "1"))
	// n1 is full: team-a borrows 2 cores over its min (6 of 4), team-c 1
	// (2 of 1); team-b uses nothing.
	a1 := withPriority(podIn("team-a", "a1", 2000).Placed(), 10)
	a2 := withPriority(podIn("team-a", "a2", 2000).Placed(), 0)
	a3 := withPriority(podIn("team-a", "a3", 2000).Placed(), 5)
	c1 := withPriority(podIn("team-c", "c1", 2000).Placed(), 100)
	pods := []*abiv1.PodSummary{a1, a2, a3, c1}
	n := node("n1", 8000, pods...)
	cl := cluster{objects: objs, usage: usage("team-a", int64(6000), "team-b", int64(0), "team-c", int64(2000))}

	// team-b is under its min: it reclaims from borrowers, lowest priority
	// first, whatever the priorities.
	b := podIn("team-b", "b", 2000).Obj()
	c, s := start(t, p, cl, b, n)
	guesttest.CheckStatus(t, s, guest.OK())
	victims, s := p.SelectVictims(c, n, pods)
	if !s.IsSuccess() || !slices.Equal(victims, []string{a2.Uid}) {
		t.Fatalf("team-b's victims %v, %+v; want a2", victims, s)
	}
	// Reclaiming stops at a lender's min: after a2 team-a is back at 4
	// cores and keeps a1 and a3; team-c's c1 is next.
	big := podIn("team-b", "big", 4000).Obj()
	c, _ = start(t, p, cl, big, n)
	victims, s = p.SelectVictims(c, n, pods)
	if !s.IsSuccess() || !slices.Equal(victims, []string{a2.Uid, c1.Uid}) {
		t.Fatalf("team-b's big victims %v, %+v; want a2, c1", victims, s)
	}
	// Nothing borrowed can free 4 cores beyond that.
	huge := podIn("team-b", "huge", 4000).Obj()
	c, _ = start(t, p, cl, huge, node("n2", 8000, a2, a1))
	_, s = p.SelectVictims(c, node("n2", 8000, a2, a1), []*abiv1.PodSummary{a1, a2})
	guesttest.CheckStatus(t, s, guest.Reject("quota: evicting pods of borrowing tenants on node n2 cannot free cpu 2"))

	// team-a at its max evicts its own pods of lower priority only.
	aPod := podIn("team-a", "a4", 2000).Obj()
	aPod.Message().Priority = 6
	c, s = start(t, p, cl, aPod, n)
	guesttest.CheckStatus(t, s, guest.Reject("quota: tenant team-a would exceed its max of cpu: uses 6, pod requests 2, max 6"))
	victims, s = p.SelectVictims(c, n, pods)
	if !s.IsSuccess() || !slices.Equal(victims, []string{a2.Uid}) {
		t.Fatalf("team-a's victims %v, %+v; want a2", victims, s)
	}
	aPod.Message().Priority = 0
	c, _ = start(t, p, cl, aPod, n)
	_, s = p.SelectVictims(c, n, pods)
	guesttest.CheckStatus(t, s, guest.Reject("quota: evicting lower-priority pods of tenant team-a on node n1 cannot free cpu 2"))

	// A node with room: quota is not why the pod fails there.
	c, _ = start(t, p, cl, b, node("roomy", 0))
	_, s = p.SelectVictims(c, node("roomy", 0), nil)
	guesttest.CheckStatus(t, s, guest.Reject("quota: evicting cannot help on node roomy: the pod fits its resources and its tenant's quota"))
}

func TestWithoutPreFilterState(t *testing.T) {
	p := mustParse(t, "")
	c := &guest.Cycle{Pod: podIn("team-a", "p", 1).Obj()}
	n := node("n1", 0)
	for name, s := range map[string]guest.Status{
		"Filter":    p.Filter(c, n),
		"AddPod":    p.AddPod(c, podIn("team-a", "q", 1).Placed(), n),
		"RemovePod": p.RemovePod(c, podIn("team-a", "q", 1).Placed(), n),
	} {
		if s.Code != guest.Error || !strings.HasPrefix(s.Reasons[0], "quota: ") {
			t.Errorf("%s without state: %+v", name, s)
		}
	}
}

func TestFormatAmount(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    int64
		want string
	}{
		{"cpu", 4000, "4"}, {"cpu", 500, "500m"}, {"cpu", 0, "0"},
		{"memory", 8 << 30, "8Gi"}, {"memory", 1536 << 20, "1536Mi"}, {"memory", 1000, "1000"},
		{"nvidia.com/gpu", 2, "2"}, {"cpu", unlimited, "unlimited"},
	} {
		if got := formatAmount(tc.name, tc.v); got != tc.want {
			t.Errorf("formatAmount(%s, %d) = %q, want %q", tc.name, tc.v, got, tc.want)
		}
	}
}
