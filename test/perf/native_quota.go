package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
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

// quotaPolicyName prefixes the quota rules' reasons, as the example's name
// does.
const quotaPolicyName = "quota"

// QuotaNative is the quota example policy (examples/quota) with quotas from
// settings and tenants by namespace, written as an ordinary compiled-in
// scheduler plugin: the same rules, verdicts, reasons and scores, without
// WebAssembly. Tenant usage comes from host/clusterctx.Usage, fed as a
// native plugin would feed it: from the framework handle's pod informer and
// from the plugin's own Reserve and Unreserve. It is a benchmark fixture,
// not shipped; TestNativeQuotaTwin checks it against the wasm module.
//
// Its methods are safe for concurrent use, as the framework requires.
type QuotaNative struct {
	quotas  map[string]*tenantQuota
	tenants []string // with a quota, sorted
	usage   *clusterctx.Usage
}

var (
	_ fwk.PreFilterPlugin     = &QuotaNative{}
	_ fwk.FilterPlugin        = &QuotaNative{}
	_ fwk.ScorePlugin         = &QuotaNative{}
	_ fwk.ReservePlugin       = &QuotaNative{}
	_ fwk.EnqueueExtensions   = &QuotaNative{}
	_ fwk.PreFilterExtensions = &QuotaNative{}
)

// quotaArgs are the twin's arguments: the example's settings.
type quotaArgs struct {
	Quotas []struct {
		Tenant string            `json:"tenant"`
		Min    map[string]string `json:"min"`
		Max    map[string]string `json:"max"`
		Weight int64             `json:"weight"`
	} `json:"quotas"`
}

// tenantQuota is one tenant's quota in canonical units (milli-CPU, bytes,
// counts), by resource name.
type tenantQuota struct {
	name     string
	min, max map[string]int64
	// minNames and maxNames are the resources named, sorted: rules check
	// them in this order, so the first reason is stable.
	minNames, maxNames []string
	weight             int64
}

// NewQuotaNative is the plugin factory; its arguments are the quota
// example's settings (JSON).
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
	if h != nil {
		if _, err := h.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(pl.usage.Handler()); err != nil {
			return nil, fmt.Errorf("%s: watch pods: %w", QuotaNativeName, err)
		}
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
	pl := &QuotaNative{quotas: map[string]*tenantQuota{}, usage: usage}
	for _, q := range args.Quotas {
		tq := &tenantQuota{name: q.Tenant, weight: max(q.Weight, 1)}
		var err error
		if tq.min, tq.minNames, err = quantities(q.Min); err != nil {
			return nil, fmt.Errorf("%s: tenant %s: min: %w", QuotaNativeName, q.Tenant, err)
		}
		if tq.max, tq.maxNames, err = quantities(q.Max); err != nil {
			return nil, fmt.Errorf("%s: tenant %s: max: %w", QuotaNativeName, q.Tenant, err)
		}
		pl.quotas[q.Tenant] = tq
		pl.tenants = append(pl.tenants, q.Tenant)
	}
	sort.Strings(pl.tenants)
	return pl, nil
}

// quantities parses a resource list into canonical units: CPU in milli-CPU
// rounded up, everything else whole units rounded up.
func quantities(in map[string]string) (map[string]int64, []string, error) {
	out := map[string]int64{}
	var names []string
	for name, s := range in {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		if name == string(v1.ResourceCPU) {
			out[name] = q.MilliValue()
		} else {
			out[name] = q.Value()
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return out, names, nil
}

// amount is r's quantity of the named resource, in canonical units.
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

// Name implements fwk.Plugin.
func (*QuotaNative) Name() string { return QuotaNativeName }

const quotaKey fwk.StateKey = QuotaNativeName

// quotaState is one cycle's verdict on the pod's tenant: read only once
// PreFilter wrote it, except that AddPod and RemovePod adjust a clone's
// changes under the preemption simulation.
type quotaState struct {
	quota     *tenantQuota
	requests  *abiv1.Resources
	borrowing bool
	// changes are the requests of the pods the simulation added (+) or
	// removed (-), by tenant.
	changes map[string]*abiv1.Resources
}

// Clone implements fwk.StateData: the changes are copied, the rest shared.
func (s *quotaState) Clone() fwk.StateData {
	c := *s
	if s.changes != nil {
		c.changes = make(map[string]*abiv1.Resources, len(s.changes))
		for k, v := range s.changes {
			c.changes[k] = v
		}
	}
	return &c
}

func quotaStateOf(cs fwk.CycleState) *quotaState {
	d, err := cs.Read(quotaKey)
	if err != nil {
		return nil
	}
	return d.(*quotaState)
}

func podRequests(pod *v1.Pod) *abiv1.Resources {
	pi := framework.PodInfo{Pod: pod}
	r := convert.Resources(pi.CalculateResource().Resource)
	r.Pods = 1
	return r
}

// PreFilter judges the pod against its tenant's quota; a pod whose tenant
// has none skips the plugin.
func (pl *QuotaNative) PreFilter(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	q := pl.quotas[pod.Namespace]
	if q == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	s := &quotaState{quota: q, requests: podRequests(pod)}
	cs.Write(quotaKey, s)
	st := pl.judge(s)
	return nil, st
}

// used is the tenant's usage as the cycle sees it: the tracker's, plus the
// simulation's changes.
func (pl *QuotaNative) used(s *quotaState, tenant string) *abiv1.Resources {
	u := pl.usage.Get("", tenant)
	if c := s.changes[tenant]; c != nil {
		u = addResources(u, c, 1)
	}
	return u
}

// judge applies the rules in the example's order: max first, then
// borrowing beyond min. It sets s.borrowing.
func (pl *QuotaNative) judge(s *quotaState) *fwk.Status {
	q := s.quota
	used := pl.used(s, q.name)
	for _, r := range q.maxNames {
		u, req, limit := amount(used, r), amount(s.requests, r), q.max[r]
		if u+req > limit {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: tenant %s over max %s: %s used + %s requested > %s",
				quotaPolicyName, q.name, r, format(r, u), format(r, req), format(r, limit)))
		}
	}
	s.borrowing = false
	for _, r := range q.minNames {
		u, req := amount(used, r), amount(s.requests, r)
		if u+req <= q.min[r] {
			continue
		}
		s.borrowing = true
		// Borrowing: everyone's use plus the request must stay within
		// everyone's guaranteed share.
		var total, guaranteed int64
		for _, t := range pl.tenants {
			total += amount(pl.used(s, t), r)
			guaranteed += pl.quotas[t].min[r]
		}
		if total+req > guaranteed {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: tenant %s cannot borrow %s: %s used by all tenants + %s requested > %s guaranteed",
				quotaPolicyName, q.name, r, format(r, total), format(r, req), format(r, guaranteed)))
		}
	}
	return nil
}

// format writes a canonical amount as a Kubernetes quantity.
func format(name string, v int64) string {
	if name == string(v1.ResourceCPU) {
		return resource.NewMilliQuantity(v, resource.DecimalSI).String()
	}
	return resource.NewQuantity(v, resource.BinarySI).String()
}

func addResources(a, b *abiv1.Resources, sign int64) *abiv1.Resources {
	out := &abiv1.Resources{
		MilliCpu:         a.GetMilliCpu() + sign*b.GetMilliCpu(),
		Memory:           a.GetMemory() + sign*b.GetMemory(),
		EphemeralStorage: a.GetEphemeralStorage() + sign*b.GetEphemeralStorage(),
		Pods:             a.GetPods() + sign*b.GetPods(),
	}
	names := map[string]int64{}
	for _, s := range a.GetScalars() {
		names[s.Name] += s.Value
	}
	for _, s := range b.GetScalars() {
		names[s.Name] += sign * s.Value
	}
	for n, v := range names {
		out.Scalars = append(out.Scalars, &abiv1.Scalar{Name: n, Value: v})
	}
	slices.SortFunc(out.Scalars, func(x, y *abiv1.Scalar) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// PreFilterExtensions follows the preemption simulation.
func (pl *QuotaNative) PreFilterExtensions() fwk.PreFilterExtensions { return pl }

// AddPod counts a pod the simulation adds to its tenant.
func (pl *QuotaNative) AddPod(_ context.Context, cs fwk.CycleState, _ *v1.Pod, add fwk.PodInfo, _ fwk.NodeInfo) *fwk.Status {
	return pl.change(cs, add.GetPod(), 1)
}

// RemovePod uncounts a pod the simulation removes (a victim).
func (pl *QuotaNative) RemovePod(_ context.Context, cs fwk.CycleState, _ *v1.Pod, remove fwk.PodInfo, _ fwk.NodeInfo) *fwk.Status {
	return pl.change(cs, remove.GetPod(), -1)
}

func (pl *QuotaNative) change(cs fwk.CycleState, pod *v1.Pod, sign int64) *fwk.Status {
	s := quotaStateOf(cs)
	if s == nil || pl.quotas[pod.Namespace] == nil {
		return nil
	}
	if s.changes == nil {
		s.changes = map[string]*abiv1.Resources{}
	}
	s.changes[pod.Namespace] = addResources(s.changes[pod.Namespace], podRequests(pod), sign)
	return nil
}

// Filter re-judges the pod when the preemption simulation changed usage;
// otherwise PreFilter's verdict stands.
func (pl *QuotaNative) Filter(_ context.Context, cs fwk.CycleState, _ *v1.Pod, _ fwk.NodeInfo) *fwk.Status {
	s := quotaStateOf(cs)
	if s == nil || len(s.changes) == 0 {
		return nil
	}
	return pl.judge(s)
}

// Score ranks a pod within its tenant's guaranteed share above a borrowing
// one, by the tenant's weight.
func (pl *QuotaNative) Score(_ context.Context, cs fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	s := quotaStateOf(cs)
	if s == nil {
		return 0, nil
	}
	return quotaScore(s.quota, s.borrowing, ni), nil
}

// quotaScore is the example's Score: a guaranteed pod scores 100; a
// borrowing pod packs (the node's share of CPU requested, 0 to 50) and is
// never above 50, scaled down for lighter tenants by weight (out of 4).
func quotaScore(q *tenantQuota, borrowing bool, ni fwk.NodeInfo) int64 {
	if !borrowing {
		return fwk.MaxNodeScore
	}
	alloc := ni.GetAllocatable().GetMilliCPU()
	if alloc <= 0 {
		return 0
	}
	packed := min(ni.GetRequested().GetMilliCPU()*50/alloc, 50)
	return packed * min(q.weight, 4) / 4
}

// ScoreExtensions implements fwk.ScorePlugin.
func (*QuotaNative) ScoreExtensions() fwk.ScoreExtensions { return nil }

// Reserve counts the pod as its tenant's before the binding is seen.
func (pl *QuotaNative) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) *fwk.Status {
	pl.usage.Assume(pod)
	return nil
}

// Unreserve undoes Reserve.
func (pl *QuotaNative) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	pl.usage.Forget(pod)
}

// EventsToRegister requeues rejected pods on the events WasmPolicy
// registers (host/plugin), so that both profiles retry alike.
func (*QuotaNative) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.Update}},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add | fwk.Delete | fwk.Update}},
	}, nil
}
