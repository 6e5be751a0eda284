package clusterctx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// Binding is what one loaded policy reads: a Store for each kind it
// declared, in the order of its PolicyInfo.context_kinds (the index is the
// kind's index on the wire), and the tenant usage it asked for.
type Binding struct {
	Stores []*Store
	// Usage is nil when the policy reads no tenant usage.
	Usage *Usage
	// Namespaces: usage per namespace; LabelKeys: per value of each key
	// (each watched on Usage).
	Namespaces bool
	LabelKeys  []string
}

// Registry owns the stores of one scheduler process, one per kind, each fed
// by an informer started the first time a policy needs the kind, and the
// tenant usage, fed by the pod informer. Built-in kinds come from the
// scheduler's typed informer factory (shared with the scheduler, so a kind
// it already watches costs no second watch), others from a dynamic informer
// factory. Nothing here calls the API server during a scheduling cycle.
//
// A Registry is safe for concurrent use. Informers it starts run until
// Close.
type Registry struct {
	typed informers.SharedInformerFactory
	dyn   dynamic.Interface

	stop      chan struct{}
	closeOnce sync.Once

	mu         sync.Mutex
	dynFactory dynamicinformer.DynamicSharedInformerFactory
	sources    map[Kind]*source
	usage      *Usage
}

type source struct {
	store    *Store
	informer cache.SharedIndexInformer
	mu       sync.Mutex
	lastErr  error // the informer's last list or watch failure
}

// NewRegistry returns a registry over the scheduler's typed informer
// factory and, for custom resources, a dynamic client (nil: only kinds the
// typed factory knows are available).
func NewRegistry(typed informers.SharedInformerFactory, dyn dynamic.Interface) *Registry {
	return &Registry{typed: typed, dyn: dyn, stop: make(chan struct{}), sources: map[Kind]*source{}}
}

// syncPoll is how often Store checks whether the informer synced or failed.
const syncPoll = 20 * time.Millisecond

// Store returns the store of kind k, starting its informer the first time,
// and waits until the informer has listed every object, for at most ctx's
// lifetime. The informer keeps running whatever happens (a kind that fails
// now, e.g. a CRD not installed yet, may serve later). The error names the
// kind and the cause: Secrets, a kind neither factory can serve, the API
// server not serving it (CustomResourceDefinition not installed), or RBAC
// refusing the scheduler (with the rule it needs).
func (r *Registry) Store(ctx context.Context, k Kind) (*Store, error) {
	if err := Forbidden(k); err != nil {
		return nil, err
	}
	if err := k.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	src, err := r.source(k)
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(syncPoll)
	defer tick.Stop()
	for {
		if src.informer.HasSynced() {
			return src.store, nil
		}
		src.mu.Lock()
		last := src.lastErr
		src.mu.Unlock()
		if err := explain(k, last); err != nil && (apierrors.IsNotFound(last) || apierrors.IsForbidden(last)) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return nil, fmt.Errorf("%s: informer not synced (%v): %w", k, ctx.Err(), explain(k, last))
			}
			return nil, fmt.Errorf("%s: informer not synced: %w", k, ctx.Err())
		case <-tick.C:
		}
	}
}

// source returns k's source, starting its informer if it is new.
func (r *Registry) source(k Kind) (*source, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if src := r.sources[k]; src != nil {
		return src, nil
	}
	select {
	case <-r.stop:
		return nil, fmt.Errorf("%s: %w", k, ErrClosed)
	default:
	}
	var inf cache.SharedIndexInformer
	typed := false
	if r.typed != nil {
		if g, err := r.typed.ForResource(k.GVR()); err == nil {
			inf, typed = g.Informer(), true
		}
	}
	if inf == nil {
		if r.dyn == nil {
			return nil, fmt.Errorf("%s: not a kind the scheduler's informers know, and no dynamic client to watch custom resources", k)
		}
		if r.dynFactory == nil {
			r.dynFactory = dynamicinformer.NewDynamicSharedInformerFactory(r.dyn, 0)
		}
		inf = r.dynFactory.ForResource(k.GVR()).Informer()
	}
	src := &source{store: NewStore(k), informer: inf}
	// Fails when the informer already runs (a kind the scheduler watches
	// itself): its errors are then the scheduler's to report.
	_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		src.mu.Lock()
		src.lastErr = err
		src.mu.Unlock()
	})
	if _, err := inf.AddEventHandler(src.store.Handler()); err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	if typed {
		r.typed.Start(r.stop)
	} else {
		r.dynFactory.Start(r.stop)
	}
	r.sources[k] = src
	return src, nil
}

// explain turns an informer's list or watch failure into the cause an
// operator acts on.
func explain(k Kind, err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: the API server does not serve this resource (is its CustomResourceDefinition installed?): %w", k, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: forbidden: the scheduler's service account needs an RBAC rule allowing get, list and watch on %q in API group %q: %w", k, k.Resource, k.Group, err)
	}
	return fmt.Errorf("%s: %w", k, err)
}

// Usage returns the tenant usage, starting the pod informer's handler the
// first time.
func (r *Registry) Usage() *Usage {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.usage == nil {
		r.usage = NewUsage()
		if r.typed != nil {
			_, _ = r.typed.Core().V1().Pods().Informer().AddEventHandler(r.usage.Handler())
			r.typed.Start(r.stop)
		}
	}
	return r.usage
}

// Close stops the informers the registry started. Starting the typed
// factory starts every informer requested from it so far, the scheduler's
// own included when the scheduler had not started them yet: close the
// registry only when the scheduler stops.
func (r *Registry) Close() { r.closeOnce.Do(func() { close(r.stop) }) }

// ErrClosed is returned by Store after Close.
var ErrClosed = errors.New("registry closed")
