package lifecycle

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/source"
)

// crdStore is a profile's SchedulingPolicies in its namespace, watched
// through a dynamic informer: those the arguments name (required, in
// order) or select by label (ordered by spec.order, then name). Their
// state is their status subresource.
type crdStore struct {
	client    dynamic.Interface
	kube      kubernetes.Interface
	namespace string
	sel       *PolicySelection
	selector  labels.Selector // nil: by name
	ceil      *Ceilings
	logger    klog.Logger
	oci       ociFetcher

	informer cache.SharedIndexInformer

	mu      sync.Mutex
	listErr error
}

func newCRDStore(client dynamic.Interface, kube kubernetes.Interface, args *Args, logger klog.Logger) *crdStore {
	s := &crdStore{client: client, kube: kube, namespace: args.Namespace, sel: args.SchedulingPolicies, ceil: args.Ceilings, logger: logger}
	if sel := args.SchedulingPolicies.Selector; sel != nil {
		s.selector, _ = metav1.LabelSelectorAsSelector(sel) // validated by Validate
	}
	return s
}

func (s *crdStore) start(ctx, startup context.Context, changed func()) {
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(s.client, catalogResync, s.namespace, nil)
	s.informer = factory.ForResource(api.GVR).Informer()
	_, _ = s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { changed() },
		UpdateFunc: func(_, _ any) { changed() },
		DeleteFunc: func(any) { changed() },
	})
	_ = s.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		s.mu.Lock()
		s.listErr = err
		s.mu.Unlock()
		changed()
	})
	factory.Start(ctx.Done())
	go func() { <-ctx.Done(); factory.Shutdown() }()
	if !cache.WaitForCacheSync(startup.Done(), s.informer.HasSynced) {
		s.mu.Lock()
		err := s.listErr
		s.mu.Unlock()
		s.logger.Error(err, "SchedulingPolicies not listed yet: the profile starts without them and keeps trying (is the CRD installed? manifests/crd.yaml)",
			"namespace", s.namespace)
	}
}

func (s *crdStore) selected() ([]*api.SchedulingPolicy, []Blocker) {
	byName := map[string]*api.SchedulingPolicy{}
	for _, obj := range s.informer.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		sp, err := api.FromUnstructured(u)
		if err != nil {
			s.logger.Error(err, "Ignoring a SchedulingPolicy that does not decode")
			continue
		}
		byName[sp.Name] = sp
	}
	var out []*api.SchedulingPolicy
	if s.selector == nil {
		var blocked []Blocker
		for _, n := range s.sel.Names {
			if sp := byName[n]; sp != nil {
				out = append(out, sp)
				continue
			}
			why := fmt.Sprintf("SchedulingPolicy %s/%s does not exist", s.namespace, n)
			s.mu.Lock()
			if s.listErr != nil && !s.informer.HasSynced() {
				why = fmt.Sprintf("SchedulingPolicies in %s cannot be listed: %v", s.namespace, s.listErr)
			}
			s.mu.Unlock()
			blocked = append(blocked, Blocker{Name: n, Reason: why})
		}
		return out, blocked
	}
	for _, sp := range byName {
		if s.selector.Matches(labels.Set(sp.Labels)) {
			out = append(out, sp)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Spec.Order != out[j].Spec.Order {
			return out[i].Spec.Order < out[j].Spec.Order
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

func (s *crdStore) get(name string) (*api.SchedulingPolicy, bool) {
	obj, ok, err := s.informer.GetStore().GetByKey(s.namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, false
	}
	sp, err := api.FromUnstructured(u)
	return sp, err == nil
}

func (s *crdStore) argsOf(sp *api.SchedulingPolicy) PolicyArgs { return argsOf(sp) }

func (s *crdStore) pending(*api.SchedulingPolicy) bool { return false }

func (s *crdStore) deactivated(string) bool { return false }

// refetch: always. A fetch that failed is retried at each resync: the
// chunks may have been pushed late, the URL may be back.
func (s *crdStore) refetch(_, _ *api.SchedulingPolicy) bool { return true }

// required: a policy named in the arguments is; one selected by label is
// not (it stops applying when it goes).
func (s *crdStore) required(string) bool { return s.selector == nil }

func (s *crdStore) ceilings() *Ceilings { return s.ceil }

// update reads the resource, lets mutate change its status and writes the
// status if it changed; conflicts are read and mutated again.
func (s *crdStore) update(ctx context.Context, name string, mutate func(*api.SchedulingPolicy)) error {
	res := s.client.Resource(api.GVR).Namespace(s.namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		sp, err := api.FromUnstructured(u)
		if err != nil {
			return err
		}
		before := sp.Status.DeepCopy()
		mutate(sp)
		if reflect.DeepEqual(before, &sp.Status) {
			return nil
		}
		out, err := api.ToUnstructured(sp)
		if err != nil {
			return err
		}
		_, err = res.UpdateStatus(ctx, out, metav1.UpdateOptions{FieldManager: "wasmsched-scheduler"})
		return err
	})
}

// fetch reads a module from where the spec says it is.
func (s *crdStore) fetch(ctx context.Context, _ string, m api.Module) (source.Version, error) {
	switch {
	case m.OCI != "" && m.PullSecret != "":
		return s.oci.fetchWith(ctx, m.OCI, m.SHA256, func(ctx context.Context) (authn.Keychain, error) {
			return pullSecret(ctx, s.kube, s.namespace, m.PullSecret)
		})
	case m.OCI != "":
		return s.oci.fetch(ctx, m.OCI, m.SHA256)
	case m.URL != "":
		return source.FetchURL(ctx, m.URL, m.SHA256)
	case m.File != "":
		return source.ReadFile(m.File, m.SHA256)
	}
	return source.FetchModule(ctx, s.kube, s.namespace, m.SHA256)
}

// resolve reads what the tag m names now, with its pull secret.
func (s *crdStore) resolve(ctx context.Context, _ string, m api.Module) (source.OCIResolution, error) {
	var keychain func(context.Context) (authn.Keychain, error)
	if m.PullSecret != "" {
		keychain = func(ctx context.Context) (authn.Keychain, error) {
			return pullSecret(ctx, s.kube, s.namespace, m.PullSecret)
		}
	}
	return s.oci.resolve(ctx, m.OCI, m.SHA256, keychain)
}

// keep: a SchedulingPolicy's modules stay where they are (immutable
// chunks, which `wasmsched push` keeps while status.lastGood names them;
// a pinned URL; a file of the image); modules from registries are in the
// module cache since their pull.
func (s *crdStore) keep(api.Revision, []byte) error { return nil }

func (s *crdStore) rejectedNote(e *entry, rev api.Revision, err error) string {
	return fmt.Sprintf("revision %s refused: %v; %s", rev.Short(), err, e.servingNote())
}

// eventRef is the SchedulingPolicy at its resource version, so that each
// spec change starts its own Event series and the message shown is the
// one about that spec, not the first ever.
func (s *crdStore) eventRef(sp *api.SchedulingPolicy, _ error) *v1.ObjectReference {
	return &v1.ObjectReference{APIVersion: api.GroupVersion.String(), Kind: api.Kind, Namespace: sp.Namespace, Name: sp.Name,
		UID: sp.UID, ResourceVersion: sp.ResourceVersion}
}
