package perf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/clusterctx"
	"github.com/wasmsched/wasmsched/host/convert"
)

// QuotaNativeName is the quota twin's name in scheduler configurations.
const QuotaNativeName = "QuotaNative"

// QuotaNative is the quota example policy (examples/quota) with quotas from
// settings and tenants by namespace, written as an ordinary compiled-in
// scheduler plugin: the same rules in the same order, the same verdicts,
// reasons and scores, without WebAssembly. Tenant usage comes from
// host/clusterctx.Usage, fed as a native plugin would feed it: from the
// framework handle's pod informer and from the plugin's own Reserve and
// Unreserve. Like the example, PreFilter judges the pod once per cycle and
// Filter returns that verdict on every node unless the preemption
// simulation changed the tenants' use (AddPod, RemovePod). It does not
// read ElasticQuota objects nor tenant labels, and has no SelectVictims: the
// benchmark neither installs the CRD nor preempts. It is a benchmark
// fixture, not shipped; TestNativeQuotaTwin checks it against the wasm
// module.
//
// Its methods are safe for concurrent use, as the framework requires: the
// quotas are read only, the usage tracker locks, and a cycle's state is
// written by PreFilter (and by AddPod and RemovePod on clones) before the
// Filter and Score calls that read it.
type QuotaNative struct {
	configured map[string]*nativeQuota
	weights    map[string]int64
	maxWeight  int64
	usage      *clusterctx.Usage
	// roster is every tenant with a quota (used nil) and index its
	// position by name, as the example's roster; bounds counts their
	// bounds.
	roster []quotaTenant
	index  map[string]int
	bounds int
}

var (
	_ fwk.PreFilterPlugin     = &QuotaNative{}
	_ fwk.PreFilterExtensions = &QuotaNative{}
	_ fwk.FilterPlugin        = &QuotaNative{}
	_ fwk.ScorePlugin         = &QuotaNative{}
	_ fwk.ReservePlugin       = &QuotaNative{}
	_ fwk.EnqueueExtensions   = &QuotaNative{}
)

// quotaArgs are the example's settings (examples/quota/settings.go): the
// twin takes the same JSON.
type quotaArgs struct {
	TenantLabel   string `json:"tenantLabel"`
	ElasticQuotas *bool  `json:"elasticQuotas"`
	Quotas        map[string]struct {
		Min    map[string]quotaAmount `json:"min"`
		Max    map[string]quotaAmount `json:"max"`
		Weight int64                  `json:"weight"`
	} `json:"quotas"`
}

// quotaAmount is a quantity in settings: a JSON string or number.
type quotaAmount string

func (a *quotaAmount) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	*a = quotaAmount(s)
	return nil
}

// quotaMaxWeight is the example's MaxWeight.
const quotaMaxWeight = 1000

// quotaUnlimited is the max of a resource a quota names only in min.
const quotaUnlimited = math.MaxInt64

// quotaBound is one resource a quota governs, in canonical units
// (milli-CPU, bytes, counts): min 0 when only max names it, max unlimited
// when only min names it.
type quotaBound struct {
	name     string
	min, max int64
}

// nativeQuota is a tenant's quota, its bounds sorted by resource name.
type nativeQuota struct{ bounds []quotaBound }

func (q *nativeQuota) index(name string) int {
	for i := range q.bounds {
		if q.bounds[i].name == name {
			return i
		}
	}
	return -1
}

// NewQuotaNative is the plugin factory; its arguments are the quota
// example's settings (JSON), with elasticQuotas false and no tenantLabel.
func NewQuotaNative(_ context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	var raw []byte
	switch a := obj.(type) {
	case *runtime.Unknown:
		raw = a.Raw
	case nil:
	default:
		return nil, fmt.Errorf("%s: arguments of type %T, want the quota settings", QuotaNativeName, obj)
	}
	pl, err := newQuotaNative(raw, clusterctx.NewUsage())
	if err != nil {
		return nil, err
	}
	if _, err := h.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(pl.usage.Handler()); err != nil {
		return nil, fmt.Errorf("%s: watch pods: %w", QuotaNativeName, err)
	}
	return pl, nil
}

func newQuotaNative(raw []byte, usage *clusterctx.Usage) (*QuotaNative, error) {
	var args quotaArgs
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &args); err != nil {
			return nil, fmt.Errorf("%s: settings: %w", QuotaNativeName, err)
		}
	}
	if args.ElasticQuotas == nil || *args.ElasticQuotas || args.TenantLabel != "" {
		return nil, fmt.Errorf(`%s: only quotas in settings by namespace: set "elasticQuotas": false and no "tenantLabel"`, QuotaNativeName)
	}
	pl := &QuotaNative{configured: map[string]*nativeQuota{}, weights: map[string]int64{}, maxWeight: 1, usage: usage}
	for t, ts := range args.Quotas {
		if t == "" || ts.Weight < 0 || ts.Weight > quotaMaxWeight {
			return nil, fmt.Errorf("%s: tenant %q: bad name or weight %d", QuotaNativeName, t, ts.Weight)
		}
		if ts.Weight > 0 {
			pl.weights[t] = ts.Weight
			pl.maxWeight = max(pl.maxWeight, ts.Weight)
		}
		if len(ts.Min) == 0 && len(ts.Max) == 0 {
			continue
		}
		q := &nativeQuota{}
		for name, a := range ts.Min {
			v, err := canonical(name, string(a))
			if err != nil {
				return nil, fmt.Errorf("%s: tenant %s: min: %w", QuotaNativeName, t, err)
			}
			q.at(name).min = v
		}
		for name, a := range ts.Max {
			v, err := canonical(name, string(a))
			if err != nil {
				return nil, fmt.Errorf("%s: tenant %s: max: %w", QuotaNativeName, t, err)
			}
			q.at(name).max = v
		}
		pl.configured[t] = q
	}
	pl.index = map[string]int{}
	for name, q := range pl.configured {
		pl.index[name] = len(pl.roster)
		pl.roster = append(pl.roster, quotaTenant{name: name, quota: q, weight: pl.weight(name)})
		pl.bounds += len(q.bounds)
	}
	return pl, nil
}

// at returns the bound of resource name, adding one (min 0, unlimited).
func (q *nativeQuota) at(name string) *quotaBound {
	if i := q.index(name); i >= 0 {
		return &q.bounds[i]
	}
	i, _ := slices.BinarySearchFunc(q.bounds, name, func(b quotaBound, n string) int { return strings.Compare(b.name, n) })
	q.bounds = slices.Insert(q.bounds, i, quotaBound{name: name, max: quotaUnlimited})
	return &q.bounds[i]
}

// canonical parses a quantity as the SDK's ParseQuantity does: CPU in
// milli-CPU rounded up, everything else whole units rounded up.
func canonical(name, s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() < 0 {
		return 0, fmt.Errorf("%s is not a non-negative quantity: %q", name, s)
	}
	if name == string(v1.ResourceCPU) {
		return q.MilliValue(), nil
	}
	return q.Value(), nil
}

// amount is the guest SDK's Quantity: r's amount of a resource.
func amount(r *abiv1.Resources, name string) int64 {
	switch v1.ResourceName(name) {
	case v1.ResourceCPU:
		return r.GetMilliCpu()
	case v1.ResourceMemory:
		return r.GetMemory()
	case v1.ResourceEphemeralStorage:
		return r.GetEphemeralStorage()
	case v1.ResourcePods:
		return r.GetPods()
	}
	for _, s := range r.GetScalars() {
		if s.Name == name {
			return s.Value
		}
	}
	return 0
}

// formatQuota is the example's formatAmount: cores or millicores for cpu, a
// binary suffix for whole Ki..Ti of byte resources, a plain number
// otherwise.
func formatQuota(name string, v int64) string {
	if v == quotaUnlimited {
		return "unlimited"
	}
	switch {
	case name == string(v1.ResourceCPU):
		if v%1000 == 0 {
			return strconv.FormatInt(v/1000, 10)
		}
		return strconv.FormatInt(v, 10) + "m"
	case name == string(v1.ResourceMemory) || name == string(v1.ResourceEphemeralStorage) || strings.HasPrefix(name, "hugepages-"):
		for _, u := range []struct {
			suffix string
			size   int64
		}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
			if v != 0 && v%u.size == 0 {
				return strconv.FormatInt(v/u.size, 10) + u.suffix
			}
		}
	}
	return strconv.FormatInt(v, 10)
}

// Name implements fwk.Plugin.
func (*QuotaNative) Name() string { return QuotaNativeName }

const quotaKey fwk.StateKey = QuotaNativeName

// quotaTenant is one tenant with a quota as a cycle sees it.
type quotaTenant struct {
	name   string
	quota  *nativeQuota
	weight int64
	// used is what the tenant's pods request, by quota.bounds position.
	used []int64
}

// addUsage adds (sign 1) or removes (-1) requests, never below 0.
func (t *quotaTenant) addUsage(r *abiv1.Resources, sign int64) {
	if r == nil {
		return
	}
	for i, b := range t.quota.bounds {
		t.used[i] = max(0, t.used[i]+sign*amount(r, b.name))
	}
}

// quotaState is one cycle's state, as the example's cycleState: the pod's
// tenant's quota and use, its requests and the verdict, and every tenant's
// use once the verdict or the simulation needs it (every).
type quotaState struct {
	tenant   string
	own      *quotaTenant
	tenants  []quotaTenant
	index    map[string]int
	requests *abiv1.Resources
	verdict  *fwk.Status
	borrowed []int
	changed  bool
	// load fills tenants and points own into them; nil once loaded.
	load func(*quotaState)
}

// every returns every tenant with its use, reading the others' on the
// first call, as the example does.
func (s *quotaState) every() []quotaTenant {
	if s.load != nil {
		load := s.load
		s.load = nil
		load(s)
	}
	return s.tenants
}

// Clone implements fwk.StateData: the preemption simulation changes a
// clone's use, so the tenants are read and copied.
func (s *quotaState) Clone() fwk.StateData {
	s.every()
	c := *s
	c.tenants = slices.Clone(s.tenants)
	for i := range c.tenants {
		c.tenants[i].used = slices.Clone(s.tenants[i].used)
		if &s.tenants[i] == s.own {
			c.own = &c.tenants[i]
		}
	}
	return &c
}

// lookup returns the named tenant in the cycle, nil when it has no quota.
func (s *quotaState) lookup(name string) *quotaTenant {
	if i, ok := s.index[name]; ok {
		return &s.every()[i]
	}
	return nil
}

func quotaStateOf(cs fwk.CycleState) (*quotaState, *fwk.Status) {
	d, err := cs.Read(quotaKey)
	if err != nil {
		return nil, fwk.AsStatus(errors.New("quota: no cycle state: PreFilter did not run"))
	}
	return d.(*quotaState), nil
}

// podQuotaRequests are the pod's requests as the guest sees them
// (Pod.Request): the effective requests, pods not counted.
func podQuotaRequests(pod *v1.Pod) *abiv1.Resources {
	pi := framework.PodInfo{Pod: pod}
	return convert.Resources(pi.CalculateResource().Resource)
}

// PreFilter computes the pod's tenant's use and the pod's verdict, once
// per cycle, and always leaves the state; the other tenants' use is read
// when the verdict or the simulation needs it.
func (pl *QuotaNative) PreFilter(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	st := &quotaState{tenant: pod.Namespace, index: pl.index, requests: podQuotaRequests(pod), load: pl.loadTenants}
	if i, ok := pl.index[st.tenant]; ok {
		own := pl.roster[i]
		own.used = make([]int64, len(own.quota.bounds))
		own.addUsage(pl.usage.Get("", own.name), 1)
		st.own = &own
	}
	st.verdict, st.borrowed = st.judge()
	cs.Write(quotaKey, st)
	return nil, st.verdict
}

// loadTenants fills st.tenants with every tenant and its use, and points
// st.own at the pod's tenant among them.
func (pl *QuotaNative) loadTenants(st *quotaState) {
	st.tenants = slices.Clone(pl.roster)
	used := make([]int64, pl.bounds)
	for i := range st.tenants {
		t := &st.tenants[i]
		n := len(t.quota.bounds)
		t.used, used = used[:n:n], used[n:]
		t.addUsage(pl.usage.Get("", t.name), 1)
	}
	if i, ok := st.index[st.tenant]; ok {
		st.own = &st.tenants[i]
	}
}

func (pl *QuotaNative) weight(tenant string) int64 {
	if w, ok := pl.weights[tenant]; ok {
		return w
	}
	return 1
}

// judge applies the rules: over max is rejected; above min is borrowing,
// allowed while the other tenants' unused min covers all the tenant would
// then borrow. It returns the verdict and the resources borrowed.
func (st *quotaState) judge() (*fwk.Status, []int) {
	t := st.own
	if t == nil {
		return nil, nil
	}
	for i, b := range t.quota.bounds {
		need := amount(st.requests, b.name)
		if need > 0 && b.max != quotaUnlimited && t.used[i]+need > b.max {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("quota: tenant %s would exceed its max of %s: uses %s, pod requests %s, max %s",
				t.name, b.name, formatQuota(b.name, t.used[i]), formatQuota(b.name, need), formatQuota(b.name, b.max))), nil
		}
	}
	var borrowed []int
	for i, b := range t.quota.bounds {
		need := amount(st.requests, b.name)
		after := t.used[i] + need
		if need == 0 || after <= b.min {
			continue
		}
		borrowed = append(borrowed, i)
		if lend := st.lendable(b.name, t); after-b.min > lend {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("quota: tenant %s cannot borrow %s: uses %s, pod requests %s, min %s, other tenants' unused min %s",
				t.name, b.name, formatQuota(b.name, t.used[i]), formatQuota(b.name, need), formatQuota(b.name, b.min),
				formatQuota(b.name, max(0, lend)))), borrowed
		}
	}
	return nil, borrowed
}

// lendable is what the tenants other than t may lend of resource name: the
// sum over those governing it of min - used.
func (st *quotaState) lendable(name string, t *quotaTenant) int64 {
	var l int64
	tenants := st.every()
	for i := range tenants {
		u := &tenants[i]
		if u.name == t.name {
			continue
		}
		if i := u.quota.index(name); i >= 0 {
			l += u.quota.bounds[i].min - u.used[i]
		}
	}
	return l
}

// PreFilterExtensions follows the preemption simulation.
func (pl *QuotaNative) PreFilterExtensions() fwk.PreFilterExtensions { return pl }

// AddPod counts a pod the simulation adds in its tenant's use.
func (pl *QuotaNative) AddPod(_ context.Context, cs fwk.CycleState, _ *v1.Pod, add fwk.PodInfo, _ fwk.NodeInfo) *fwk.Status {
	return pl.change(cs, add.GetPod(), 1)
}

// RemovePod takes a pod the simulation removes out of its tenant's use.
func (pl *QuotaNative) RemovePod(_ context.Context, cs fwk.CycleState, _ *v1.Pod, remove fwk.PodInfo, _ fwk.NodeInfo) *fwk.Status {
	return pl.change(cs, remove.GetPod(), -1)
}

func (pl *QuotaNative) change(cs fwk.CycleState, pod *v1.Pod, sign int64) *fwk.Status {
	st, s := quotaStateOf(cs)
	if s != nil {
		return s
	}
	st.changed = true
	if t := st.lookup(pod.Namespace); t != nil {
		t.addUsage(podQuotaRequests(pod), sign)
	}
	return nil
}

// Filter returns PreFilter's verdict on every node (quota does not depend
// on the node), and judges again when the simulation changed the use.
func (pl *QuotaNative) Filter(_ context.Context, cs fwk.CycleState, _ *v1.Pod, _ fwk.NodeInfo) *fwk.Status {
	st, s := quotaStateOf(cs)
	if s != nil {
		return s
	}
	if !st.changed {
		return st.verdict
	}
	v, _ := st.judge()
	return v
}

// The example's scores: every node Guaranteed for a pod that borrows
// nothing, at most BorrowingMax for a borrowing one.
const (
	quotaGuaranteed   = 100
	quotaBorrowingMax = 50
)

// Score is the example's: a borrowing pod scores more on fuller nodes (the
// share of each borrowed resource requested there with the pod, averaged),
// scaled by the tenant's weight over the largest weight.
func (pl *QuotaNative) Score(_ context.Context, cs fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	st, s := quotaStateOf(cs)
	if s != nil {
		return 0, s
	}
	if st.own == nil || len(st.borrowed) == 0 {
		return quotaGuaranteed, nil
	}
	var fill, counted int64
	for _, i := range st.borrowed {
		name := st.own.quota.bounds[i].name
		alloc, requested := nodeAmounts(ni, name)
		if alloc <= 0 {
			continue
		}
		used := requested + amount(st.requests, name)
		fill += min(100, used*100/alloc)
		counted++
	}
	if counted > 0 {
		fill /= counted
	}
	return fill * quotaBorrowingMax * st.own.weight / (100 * pl.maxWeight), nil
}

// nodeAmounts returns a node's allocatable and requested amounts of a
// resource, as the guest's NodeInfo.Allocatable and Requested.
func nodeAmounts(ni fwk.NodeInfo, name string) (alloc, requested int64) {
	a, r := ni.GetAllocatable(), ni.GetRequested()
	switch v1.ResourceName(name) {
	case v1.ResourceCPU:
		return a.GetMilliCPU(), r.GetMilliCPU()
	case v1.ResourceMemory:
		return a.GetMemory(), r.GetMemory()
	case v1.ResourceEphemeralStorage:
		return a.GetEphemeralStorage(), r.GetEphemeralStorage()
	case v1.ResourcePods:
		return int64(a.GetAllowedPodNumber()), int64(len(ni.GetPods()))
	}
	rn := v1.ResourceName(name)
	return a.GetScalarResources()[rn], r.GetScalarResources()[rn]
}

// ScoreExtensions implements fwk.ScorePlugin: the example's scores are not
// normalised.
func (*QuotaNative) ScoreExtensions() fwk.ScoreExtensions { return nil }

// Reserve counts the pod in its tenant's use before the binding is seen,
// as WasmPolicy does for every pod of its profile.
func (pl *QuotaNative) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) *fwk.Status {
	pl.usage.Assume(pod)
	return nil
}

// Unreserve undoes Reserve.
func (pl *QuotaNative) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	pl.usage.Forget(pod)
}

// EventsToRegister lists the events that can turn a quota rejection into
// a fit: a pod of a tenant with a quota deleted from a node or scaled down
// (its tenant's use, or what the others can lend, went down; an assumed pod
// that failed to bind comes back as such a deletion), and the rejected
// pod's own requests changed. The quotas are settings, the rules read
// nothing of nodes to judge: no other event requeues.
func (pl *QuotaNative) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: assignedPod, ActionType: fwk.Delete | fwk.UpdatePodScaleDown}, QueueingHintFn: pl.quotaPodFreed},
		{Event: fwk.ClusterEvent{Resource: targetPod, ActionType: fwk.Update}, QueueingHintFn: quotaPodUpdated},
	}, nil
}
