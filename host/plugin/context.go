package plugin

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host/clusterctx"
	"github.com/wasmsched/wasmsched/host/lifecycle"
	"github.com/wasmsched/wasmsched/host/policy"
)

// What a policy reads of the cluster: the allow-list and the binding.
//
// A version declares, in its PolicyInfo, the kinds of cluster object it
// reads and the tenant usage it wants. Before it serves, bind checks
// every declared kind against the policy's allow-list (PolicyArgs.Context,
// the SchedulingPolicy's spec.context), refuses Secrets whatever the list
// says, gets each kind's store from the scheduler's clusterctx.Registry
// (starting its informer and waiting for it to list everything) and binds
// the version to them. Any failure refuses the version like a failed load:
// the version serving keeps serving.

// contextSyncTimeout bounds the wait for a kind's informer to list every
// object when a version loads: a kind that cannot sync (CRD not installed,
// RBAC forbidding the list) refuses the version with the informer's last
// error rather than hang the load. Below the lifecycle's start-up wait, so
// that a policy's refusal names the kind rather than the start-up
// deadline. A variable so tests can shorten it.
var contextSyncTimeout = 30 * time.Second

// stageContext: the version loaded and waits for the stores of the kinds
// it reads to sync.
const stageContext = "syncing context"

// maxUsageKeys bounds the pod label keys one version may ask tenant usage
// for: each key is counted for every pod the scheduler sees.
const maxUsageKeys = 8

// clusterContext is one scheduler process's cluster objects and tenant
// usage (one informer factory: every profile of the scheduler shares it).
// Its methods are safe for concurrent use.
type clusterContext struct {
	reg *clusterctx.Registry
	// usage is set once a bound version reads tenant usage: from then on
	// Reserve and Unreserve keep it exact for assumed pods. Before, nobody
	// reads it, and the pod informer is not asked to feed it.
	usage atomic.Pointer[clusterctx.Usage]
	// refs counts the plugins (profiles) using it; guarded by contexts.mu.
	refs int
	// watched: the stores whose changes requeue pods (*clusterctx.Store ->
	// struct{}); requeuers: each profile's requeue, by its plugin.
	watched   sync.Map
	requeuers sync.Map // *Plugin -> func(clusterctx.Kind)
}

// contextRequeueDelay coalesces the requeues cluster object changes cause:
// a profile's pending pods are activated at most once per delay, however
// many objects change (a flood of ElasticQuota updates is one requeue).
const contextRequeueDelay = time.Second

// watch makes changes of st requeue the pending pods of every profile: a
// rejection that read an object may not hold after it changed, and no
// scheduler event covers a custom resource.
func (c *clusterContext) watch(st *clusterctx.Store) {
	if _, loaded := c.watched.LoadOrStore(st, struct{}{}); loaded {
		return
	}
	kind := st.Kind()
	st.OnChange(func() {
		c.requeuers.Range(func(_, fn any) bool {
			fn.(func(clusterctx.Kind))(kind)
			return true
		})
	})
}

// tenantUsage stands, among the kinds whose changes requeue pods, for the
// tenant usage: a pod stopped counting in it.
var tenantUsage = clusterctx.Kind{Resource: "(tenant usage)"}

// watchUsage makes a pod that stops counting in u requeue the pods refused
// by policies that read tenant usage: the pod event that freed the quota
// may have reached the queueing hints before the usage counted it, and the
// retry it caused was refused on the old count.
func (c *clusterContext) watchUsage(u *clusterctx.Usage) {
	u.OnRelease(func() {
		c.requeuers.Range(func(_, fn any) bool {
			fn.(func(clusterctx.Kind))(tenantUsage)
			return true
		})
	})
}

// subscribe makes the pods pl rejected follow changes of the cluster
// objects their policies read, with the requeues coalesced per kind; the
// returned function undoes it.
func (c *clusterContext) subscribe(pl *Plugin) (cancel func()) {
	if c == nil {
		return func() {}
	}
	var (
		mu      sync.Mutex
		pending = map[clusterctx.Kind]bool{}
	)
	c.requeuers.Store(pl, func(kind clusterctx.Kind) {
		mu.Lock()
		defer mu.Unlock()
		if len(pending) == 0 {
			time.AfterFunc(contextRequeueDelay, func() {
				mu.Lock()
				kinds := pending
				pending = map[clusterctx.Kind]bool{}
				mu.Unlock()
				for k := range kinds {
					pl.requeueForObjects(k)
				}
			})
		}
		pending[kind] = true
	})
	return func() { c.requeuers.Delete(pl) }
}

// contexts holds the clusterContext of each informer factory.
var contexts struct {
	sync.Mutex
	m map[informers.SharedInformerFactory]*clusterContext
}

// acquireContext returns the clusterContext of h's scheduler, made the
// first time a profile asks; release gives it back. Nil without an
// informer factory (tests without a scheduler): a version that reads the
// cluster is then refused.
func acquireContext(h fwk.Handle) *clusterContext {
	if h == nil || h.SharedInformerFactory() == nil {
		return nil
	}
	f := h.SharedInformerFactory()
	contexts.Lock()
	defer contexts.Unlock()
	if contexts.m == nil {
		contexts.m = map[informers.SharedInformerFactory]*clusterContext{}
	}
	c := contexts.m[f]
	if c == nil {
		// Custom resources come through a dynamic client; without one
		// (no kubeconfig), only the typed factory's kinds can be read.
		var dyn dynamic.Interface
		if cfg := h.KubeConfig(); cfg != nil {
			dyn, _ = dynamic.NewForConfig(cfg)
		}
		c = &clusterContext{reg: clusterctx.NewRegistry(f, dyn)}
		contexts.m[f] = c
	}
	c.refs++
	return c
}

// release drops a profile's reference; the last one closes the registry
// (the scheduler is stopping).
func (c *clusterContext) release() {
	if c == nil {
		return
	}
	contexts.Lock()
	defer contexts.Unlock()
	c.refs--
	if c.refs > 0 {
		return
	}
	for f, cc := range contexts.m {
		if cc == c {
			delete(contexts.m, f)
		}
	}
	c.reg.Close()
}

// assume counts a reserved pod in the tenant usage, as if bound.
func (c *clusterContext) assume(pod *v1.Pod) {
	if c == nil {
		return
	}
	if u := c.usage.Load(); u != nil {
		u.Assume(pod)
	}
}

// forget undoes assume for a pod whose reservation was undone.
func (c *clusterContext) forget(pod *v1.Pod) {
	if c == nil {
		return
	}
	if u := c.usage.Load(); u != nil {
		u.Forget(pod)
	}
}

// allowError is the refusal of a version that reads a kind its
// configuration does not allow.
func allowError(policyName string, k clusterctx.Kind) error {
	return fmt.Errorf("policy %s reads %s, which its configuration does not allow (add it to context)", policyName, k)
}

// bind checks what version p reads against pa's allow-list and binds it
// to the cluster's stores and usage (see the top of this file): the
// lifecycle's BindFunc. ctx bounds the wait for the stores to sync, with
// contextSyncTimeout; stage, if set, is told when that wait begins. cc may
// be nil (no informers): a version that reads the cluster is refused.
func (cc *clusterContext) bind(ctx context.Context, pa *lifecycle.PolicyArgs, p *policy.Policy, stage func(string)) error {
	info := p.Info()
	kinds := p.ContextKinds()
	wantsUsage := info.GetWantsNamespaceUsage() || len(info.GetUsageLabelKeys()) > 0
	if len(kinds) == 0 && !wantsUsage {
		return nil
	}
	allowed := map[clusterctx.Kind]bool{}
	for _, s := range pa.Context {
		k, err := clusterctx.ParseKind(s)
		if err != nil {
			return fmt.Errorf("policy %s: context: %w", pa.Name, err)
		}
		allowed[k] = true
	}
	for _, k := range kinds {
		if err := clusterctx.Forbidden(k); err != nil {
			return fmt.Errorf("policy %s reads %w", pa.Name, err)
		}
		if !allowed[k] {
			return allowError(pa.Name, k)
		}
	}
	keys := info.GetUsageLabelKeys()
	if len(keys) > maxUsageKeys {
		return fmt.Errorf("policy %s asks for tenant usage by %d pod label keys, more than the %d allowed", pa.Name, len(keys), maxUsageKeys)
	}
	for _, key := range keys {
		if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
			return fmt.Errorf("policy %s asks for tenant usage by pod label key %q, which is not a label key: %s", pa.Name, key, msgs[0])
		}
	}
	if cc == nil {
		return fmt.Errorf("policy %s reads cluster objects or tenant usage, and this scheduler has no informers to read them from", pa.Name)
	}
	b := &clusterctx.Binding{Namespaces: info.GetWantsNamespaceUsage(), LabelKeys: keys}
	if len(kinds) > 0 {
		if stage != nil {
			stage(stageContext)
		}
		sctx, cancel := context.WithTimeout(ctx, contextSyncTimeout)
		defer cancel()
		for _, k := range kinds {
			st, err := cc.reg.Store(sctx, k)
			if err != nil {
				return fmt.Errorf("policy %s cannot read %w", pa.Name, err)
			}
			cc.watch(st)
			b.Stores = append(b.Stores, st)
		}
	}
	if wantsUsage {
		b.Usage = cc.reg.Usage()
		for _, key := range keys {
			b.Usage.WatchKey(key)
		}
		if cc.usage.Swap(b.Usage) != b.Usage {
			cc.watchUsage(b.Usage)
		}
	}
	return p.Bind(b)
}
