package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/wasmsched/wasmsched/host/source/cmformat"
)

// Timing of the ConfigMap source.
const (
	// Debounce is how long the ConfigMap source waits after a change for
	// more before it assembles, so a multi-chunk apply is assembled once.
	Debounce = 100 * time.Millisecond
	// Settle is how long a set that fails to assemble must stay unchanged
	// before it is reported: applying N ConfigMaps one by one passes
	// through states where chunks of two versions are mixed.
	Settle = 2 * time.Second
)

// maxDebounce bounds the wait under a stream of changes.
const maxDebounce = time.Second

// NewConfigMaps returns a source that watches the ConfigMaps of policy in
// namespace (those labelled wasmsched.io/policy=<policy>) through an
// informer, and reassembles the module from the informer's cache
// [Debounce] after each add, update or delete. A complete, verified set
// whose digest differs from the last delivered is delivered. A set that
// fails to assemble and stays unchanged for [Settle] is reported, as a
// [*ChunkError] naming the ConfigMap concerned (once per distinct error);
// the last delivered version stays current. When no ConfigMap of the
// policy exists, at start or later, Handlers.Deleted is called. Errors of
// the informer's list and watch (e.g. forbidden) go to Handlers.Error too.
//
// Run starts the informer's goroutines and stops them before it returns.
// The client needs get, list and watch on ConfigMaps in namespace.
func NewConfigMaps(client kubernetes.Interface, namespace, policy string) Source {
	return &configMapSource{client: client, namespace: namespace, policy: policy, debounce: Debounce, settle: Settle}
}

type configMapSource struct {
	client    kubernetes.Interface
	namespace string
	policy    string
	debounce  time.Duration
	settle    time.Duration
}

func (s *configMapSource) Run(ctx context.Context, h Handlers) {
	err := ValidateName(s.policy)
	if err == nil && s.namespace == "" {
		err = errors.New("configmaps: no namespace given")
	}
	if err != nil {
		h.error(err)
		<-ctx.Done()
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory := informers.NewSharedInformerFactoryWithOptions(s.client, 0,
		informers.WithNamespace(s.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.SelectorFromSet(labels.Set{LabelPolicy: s.policy}).String()
		}),
		informers.WithTransform(stripManagedFields))
	cms := factory.Core().V1().ConfigMaps()
	inf := cms.Informer()
	lister := cms.Lister().ConfigMaps(s.namespace)

	changed := make(chan struct{}, 1)
	notify := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	})
	watchErrs := make(chan error, 1)
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return // a watch ending; the reflector starts another
		}
		select {
		case watchErrs <- fmt.Errorf("list/watch ConfigMaps of policy %s in %s: %w", s.policy, s.namespace, err):
		default:
		}
	})
	factory.Start(ctx.Done())
	// Deferred calls run last first: stop the informer, then wait for it.
	defer factory.Shutdown()
	defer cancel()

	synced := make(chan bool, 1)
	go func() { synced <- cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) }()
	for waiting := true; waiting; {
		select {
		case ok := <-synced:
			if !ok {
				return
			}
			waiting = false
		case err := <-watchErrs:
			h.error(err)
		}
	}

	select { // the first look sees what the initial list added
	case <-changed:
	default:
	}
	st := &assembly{src: s, h: h}
	timer := time.NewTimer(0) // the first look, at once
	defer timer.Stop()
	var pendingSince time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case err := <-watchErrs:
			st.lastDigest = ""
			h.error(err)
		case <-changed:
			st.failingSince = time.Time{} // a new state: it must settle anew
			now := time.Now()
			if pendingSince.IsZero() {
				pendingSince = now
			}
			timer.Reset(max(0, min(s.debounce, pendingSince.Add(maxDebounce).Sub(now))))
		case <-timer.C:
			pendingSince = time.Time{}
			list, err := lister.List(labels.Everything())
			if err != nil { // cannot happen with a cache lister
				h.error(err)
				continue
			}
			if retry := st.look(list, time.Now()); !retry.IsZero() {
				timer.Reset(time.Until(retry))
			}
		}
	}
}

// assembly is the ConfigMap source's memory between looks. It is used by
// Run's goroutine only.
type assembly struct {
	src          *configMapSource
	h            Handlers
	lastDigest   string
	lastErr      string
	failingSince time.Time
	deleted      bool
}

// look assembles the current ConfigMaps and reports. It returns when to
// look again if a failure has not settled yet.
func (a *assembly) look(list []*v1.ConfigMap, now time.Time) (retry time.Time) {
	module, digest, err := Assemble(a.src.policy, list)
	if errors.Is(err, ErrNoChunks) {
		a.lastDigest, a.lastErr, a.failingSince = "", "", time.Time{}
		if !a.deleted {
			a.deleted = true
			a.h.deleted()
		}
		return time.Time{}
	}
	a.deleted = false
	if err == nil {
		a.lastErr, a.failingSince = "", time.Time{}
		if digest != a.lastDigest {
			a.lastDigest = digest
			v := Version{Module: module, Digest: digest}
			for _, cm := range list {
				if cm.Name == ChunkName(a.src.policy, 0) {
					chunks, _ := cmformat.DeclaredChunks(cm) // well formed: Assemble took it
					v.Origin = originOf(a.src.namespace, a.src.policy, chunks)
					v.ResourceVersion = cm.ResourceVersion
					v.Signatures = chunkSignatures(a.src.namespace, cm)
				}
			}
			a.h.version(v)
		}
		return time.Time{}
	}
	if a.failingSince.IsZero() {
		a.failingSince = now
	}
	if due := a.failingSince.Add(a.src.settle); now.Before(due) {
		return due
	}
	if msg := err.Error(); msg != a.lastErr {
		a.lastErr = msg
		// The version reported next is delivered even if it is the one
		// delivered before the failure: it repairs the failure.
		a.lastDigest = ""
		a.h.error(err)
	}
	return time.Time{}
}

// stripManagedFields drops what the source never reads from cached objects.
func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
