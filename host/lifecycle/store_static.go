package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/source"
)

// StateConfigMap is the ConfigMap, in the plugin's namespace, where the
// scheduler keeps the state of statically configured policies: for each
// profile and policy (key "<profile>.<policy>.json"), a
// SchedulingPolicy status (api.SchedulingPolicyStatus) holding the last
// good revision, the quarantined ones, each replica's probation mark and
// the conditions. It is what a SchedulingPolicy keeps in its own status.
const StateConfigMap = "wasmsched-policy-state"

// staticStore is the policies of the plugin's arguments (`policies:`),
// each fed by its source (a file, ConfigMaps, a pinned URL). A policy's
// spec is its arguments with the module its source delivered last; a
// broken upload (the source's error) is a spec whose module cannot be
// fetched, refused like a SchedulingPolicy's missing chunks. The modules
// of last good revisions are kept in the module cache (the sources may no
// longer hold them), their state in StateConfigMap.
type staticStore struct {
	l         *Lifecycle
	namespace string

	mu       sync.Mutex
	policies []*staticPolicy // in the arguments' order
	byName   map[string]*staticPolicy

	// updates serialises update: each reads a policy's status, changes it
	// and remembers the result, and two at once would lose one's change
	// (a tag's resolution overwritten by a status write that read before
	// it).
	updates sync.Mutex
}

// staticPolicy is one policy's spec and state. Guarded by the store's mu.
type staticPolicy struct {
	args PolicyArgs
	// gen counts the source's reports: each is a new spec.
	gen int64
	// latest is the version the source delivered last, unless it failed
	// or was deleted since (then nil, and failure says why).
	latest  *source.Version
	failure error
	deleted bool
	status  api.SchedulingPolicyStatus
}

func newStaticStore(l *Lifecycle) *staticStore {
	s := &staticStore{l: l, namespace: l.args.Namespace, byName: map[string]*staticPolicy{}}
	for _, pa := range l.args.Policies {
		p := &staticPolicy{args: pa}
		s.policies = append(s.policies, p)
		s.byName[pa.Name] = p
	}
	return s
}

// stateKey is a policy's key in StateConfigMap.
func (s *staticStore) stateKey(name string) string { return StateKey(s.l.opts.Profile, name) }

// StateKey is the key in StateConfigMap of the state of the static policy
// called policy in scheduler profile profile.
func StateKey(profile, policy string) string {
	return unsafeKey.ReplaceAllString(profile+"."+policy, "_") + ".json"
}

// publishedSource is src as SlotStatus publishes it: a URL's password
// redacted. Nil for an empty source (a SchedulingPolicy's slot).
func publishedSource(src Source) *Source {
	if src == (Source{}) {
		return nil
	}
	if u, err := url.Parse(src.URL); err == nil && src.URL != "" {
		src.URL = u.Redacted()
	}
	return &src
}

func (s *staticStore) start(ctx, startup context.Context, changed func()) {
	if c := s.l.opts.Client; c != nil {
		cm, err := c.CoreV1().ConfigMaps(s.namespace).Get(startup, StateConfigMap, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			s.l.logger.Error(err, "Cannot read the static policies' state: they start without their last good revisions", "configMap", s.namespace+"/"+StateConfigMap)
		default:
			s.mu.Lock()
			for _, p := range s.policies {
				if raw, ok := cm.Data[s.stateKey(p.args.Name)]; ok {
					if err := json.Unmarshal([]byte(raw), &p.status); err != nil {
						s.l.logger.Error(err, "Ignoring a static policy's damaged state", "policy", p.args.Name, "configMap", s.namespace+"/"+StateConfigMap)
						p.status = api.SchedulingPolicyStatus{}
					}
				}
			}
			s.mu.Unlock()
		}
	}
	for _, p := range s.policies {
		src := s.newSource(p.args)
		go src.Run(ctx, s.handlers(p, changed))
	}
}

func (s *staticStore) newSource(pa PolicyArgs) source.Source {
	if s.l.opts.NewSource != nil {
		return s.l.opts.NewSource(pa)
	}
	switch {
	case pa.Source.ConfigMap != "":
		if s.l.opts.Client == nil {
			return failingSource{fmt.Errorf("policy %s: ConfigMap sources need the scheduler's client", pa.Name)}
		}
		return source.NewConfigMaps(s.l.opts.Client, s.namespace, pa.Source.ConfigMap)
	case pa.Source.URL != "":
		return source.NewURL(pa.Source.URL, pa.Source.SHA256, nil) // nil: a client with a timeout
	case pa.Source.OCI != "":
		src := ociSource{f: s.l.ociFetcher(), ref: pa.Source.OCI, sha256: pa.Source.SHA256}
		if secret := pa.Source.PullSecret; secret != "" {
			src.keychain = func(ctx context.Context) (authn.Keychain, error) {
				return pullSecret(ctx, s.l.opts.Client, s.namespace, secret)
			}
		}
		if pa.Source.AllowTag && source.IsOCITag(pa.Source.OCI) {
			src.resolve = func(ctx context.Context) (string, string, error) { return s.pinTag(ctx, pa) }
		}
		return src
	}
	return source.NewFile(pa.Source.File, filePoll)
}

// handlers turn a source's reports into new specs of p.
func (s *staticStore) handlers(p *staticPolicy, changed func()) source.Handlers {
	report := func(set func()) {
		s.mu.Lock()
		set()
		p.gen++
		s.mu.Unlock()
		changed()
	}
	name := p.args.Name
	return source.Handlers{
		Version: func(v source.Version) {
			report(func() { p.latest, p.failure, p.deleted = &v, nil, false })
		},
		Error: func(err error) {
			report(func() { p.latest, p.failure = nil, err })
		},
		Deleted: func() {
			reloadsTotal.WithLabelValues(name, "deleted").Inc()
			if p.args.OnDelete != OnDeleteDeactivate { // the loader logs a deactivation
				s.l.logger.Info("Policy source deleted: keeping the last good version (onDelete: Keep)", "policy", name)
			}
			report(func() {
				p.latest, p.deleted = nil, true
				p.failure = fmt.Errorf("policy %s: %s does not exist", name, describeSource(p.args.Source))
			})
		},
	}
}

// spec presents p as a SchedulingPolicy. The caller holds s.mu.
func (s *staticStore) spec(p *staticPolicy) *api.SchedulingPolicy {
	pa := p.args
	sp := &api.SchedulingPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: pa.Name, Namespace: s.namespace, Generation: p.gen},
		Spec: api.SchedulingPolicySpec{Settings: pa.Settings, Mode: api.Mode(pa.Mode), Shadows: pa.Shadows,
			FailurePolicy: api.FailurePolicy(pa.FailurePolicy), Weight: pa.Weight, Timeout: pa.Timeout, MemoryLimit: pa.MemoryLimit,
			MaxInstances: int32(pa.MaxInstances), Context: pa.Context, TrustedKeys: pa.TrustedKeys},
		Status: *p.status.DeepCopy(),
	}
	if p.latest != nil {
		sp.Spec.Module.SHA256 = p.latest.Digest
		sp.ResourceVersion = p.latest.ResourceVersion
	}
	return sp
}

func (s *staticStore) selected() ([]*api.SchedulingPolicy, []Blocker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*api.SchedulingPolicy, 0, len(s.policies))
	for _, p := range s.policies {
		out = append(out, s.spec(p))
	}
	return out, nil
}

func (s *staticStore) get(name string) (*api.SchedulingPolicy, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.byName[name]
	if p == nil {
		return nil, false
	}
	return s.spec(p), true
}

// argsOf is the policy's configured arguments with the revision's
// settings and limits: a last good revision loads with those it served
// with, even after the arguments changed.
func (s *staticStore) argsOf(sp *api.SchedulingPolicy) PolicyArgs {
	s.mu.Lock()
	p := s.byName[sp.Name]
	s.mu.Unlock()
	pa := *p.args.DeepCopy()
	pa.Settings, pa.Timeout, pa.MemoryLimit, pa.MaxInstances = sp.Spec.Settings, sp.Spec.Timeout, sp.Spec.MemoryLimit, int(sp.Spec.MaxInstances)
	pa.Context = sp.Spec.Context
	if pa.Timeout == nil || pa.MemoryLimit == nil {
		a := Args{Policies: []PolicyArgs{pa}}
		SetDefaults(&a)
		pa = a.Policies[0]
	}
	return pa
}

// pending: the spec was taken before the source's first report (its
// generation counts reports). It judges the spec the catalog holds, not
// the store now: a report arriving between the two would otherwise make
// an empty spec look like a broken upload.
func (s *staticStore) pending(sp *api.SchedulingPolicy) bool {
	return sp.Generation == 0
}

// deactivated reports that the policy's source was deleted and its
// arguments say to stop applying it then.
func (s *staticStore) deactivated(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.byName[name]
	return p.deleted && p.args.OnDelete == OnDeleteDeactivate
}

// refetch: only a new report of the source is worth fetching again (a
// source reports every change itself).
func (s *staticStore) refetch(prev, sp *api.SchedulingPolicy) bool {
	return prev == nil || prev.Generation != sp.Generation
}

// required: a static policy is always required; while it has no version
// pods wait (unless its failure policy is Ignore, or it was deactivated).
func (s *staticStore) required(string) bool { return true }

// ceilings: none; the operator wrote the limits in the arguments.
func (s *staticStore) ceilings() *Ceilings { return nil }

// update reads the policy's state from StateConfigMap (creating it), lets
// mutate change it and writes it back if it changed; without a client the
// state lives in memory only.
func (s *staticStore) update(ctx context.Context, name string, mutate func(*api.SchedulingPolicy)) error {
	s.updates.Lock()
	defer s.updates.Unlock()
	client := s.l.opts.Client
	apply := func(st *api.SchedulingPolicyStatus) (*api.SchedulingPolicyStatus, bool) {
		s.mu.Lock()
		p := s.byName[name]
		sp := s.spec(p)
		s.mu.Unlock()
		if st != nil {
			sp.Status = *st
		}
		before := sp.Status.DeepCopy()
		mutate(sp)
		return &sp.Status, !reflect.DeepEqual(before, &sp.Status)
	}
	remember := func(st *api.SchedulingPolicyStatus) {
		s.mu.Lock()
		s.byName[name].status = *st
		s.mu.Unlock()
	}
	if client == nil {
		st, _ := apply(nil)
		remember(st)
		return nil
	}
	cms := client.CoreV1().ConfigMaps(s.namespace)
	key := s.stateKey(name)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, StateConfigMap, metav1.GetOptions{})
		create := apierrors.IsNotFound(err)
		switch {
		case create:
			cm = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: StateConfigMap, Namespace: s.namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "wasmsched"}}}
		case err != nil:
			return err
		}
		var cur api.SchedulingPolicyStatus
		if raw, ok := cm.Data[key]; ok {
			if err := json.Unmarshal([]byte(raw), &cur); err != nil {
				cur = api.SchedulingPolicyStatus{} // damaged: written anew
			}
		}
		st, changed := apply(&cur)
		if !changed {
			remember(st)
			return nil
		}
		b, err := json.Marshal(st)
		if err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[key] = string(b)
		if create {
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				err = apierrors.NewConflict(v1.Resource("configmaps"), StateConfigMap, err)
			}
		} else {
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err == nil {
			remember(st)
		}
		return err
	})
}

// fetch returns the module m names: the version the source holds now,
// else the module cache, else content-addressed chunks (a module `wasmsched
// push` stored). A spec without a module is its source's failure.
func (s *staticStore) fetch(ctx context.Context, name string, m api.Module) (source.Version, error) {
	s.mu.Lock()
	p := s.byName[name]
	latest, failure := p.latest, p.failure
	s.mu.Unlock()
	if m.SHA256 == "" {
		if failure == nil {
			failure = fmt.Errorf("policy %s: its source has delivered no module yet", name)
		}
		return source.Version{}, failure
	}
	if latest != nil && latest.Digest == m.SHA256 {
		return *latest, nil
	}
	var errs []error
	if c := s.l.opts.ModuleCache; c != nil {
		v, err := c.Get(m.SHA256)
		if err == nil {
			// The signatures kept with it, for the trust policy.
			if manifest, sigs, serr := c.Signatures(m.SHA256); serr == nil {
				v.Manifest, v.Signatures = manifest, sigs
			}
			return v, nil
		}
		errs = append(errs, err)
	}
	if c := s.l.opts.Client; c != nil {
		v, err := source.FetchModule(ctx, c, s.namespace, m.SHA256)
		if err == nil {
			return v, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("no module cache and no client to look for it"))
	}
	return source.Version{}, fmt.Errorf("module %s is no longer what the source of policy %s holds: %w", m.SHA256, name, errors.Join(errs...))
}

// keep puts a last good revision's module in the module cache: the
// source (a ConfigMap overwritten by the next upload, a replaced file)
// may not hold it when the scheduler restarts.
func (s *staticStore) keep(_ api.Revision, module []byte) error {
	if c := s.l.opts.ModuleCache; c != nil && module != nil {
		if err := c.Put(module); err != nil {
			return err
		}
		s.l.trust.keepSignatures(c, source.Digest(module))
	}
	return nil
}

// rejectedNote is in the words operators of static policies know: the
// upload, and the module that keeps serving.
func (s *staticStore) rejectedNote(e *entry, _ api.Revision, err error) string {
	if cur := e.slot.currentDigest(); cur != "" {
		return fmt.Sprintf("policy %s: upload rejected, version %s keeps serving: %v", e.name, api.ShortDigest(cur), err)
	}
	return fmt.Sprintf("policy %s: upload rejected, no version serves: %v", e.name, err)
}

// eventRef is, for a policy from ConfigMaps, the chunk an error names or
// its first chunk at the version's resource version (each upload starts
// an Event series of its own); nil for files and URLs.
func (s *staticStore) eventRef(sp *api.SchedulingPolicy, err error) *v1.ObjectReference {
	s.mu.Lock()
	p := s.byName[sp.Name]
	s.mu.Unlock()
	if p == nil || p.args.Source.ConfigMap == "" {
		return nil
	}
	name, rv := source.ChunkName(p.args.Source.ConfigMap, 0), sp.ResourceVersion
	var ce *source.ChunkError
	if errors.As(err, &ce) {
		rv = ce.ResourceVersion
		name = ce.ConfigMap
		if i := strings.LastIndex(name, "/"); i >= 0 {
			name = name[i+1:]
		}
	}
	return &v1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: s.namespace, Name: name, ResourceVersion: rv}
}

// pinTag is the digest a static policy's tag is pinned to: the one its
// state records for this tag and resolve token, else the tag resolved now
// and recorded (ocitag.go).
func (s *staticStore) pinTag(ctx context.Context, pa PolicyArgs) (ref, sha256 string, err error) {
	m := api.Module{OCI: pa.Source.OCI, AllowTag: true, ResolveToken: pa.Source.ResolveToken, SHA256: strings.ToLower(pa.Source.SHA256), PullSecret: pa.Source.PullSecret}
	s.mu.Lock()
	res := s.byName[pa.Name].status.Resolved.DeepCopy()
	s.mu.Unlock()
	if !res.Matches(&m) {
		r, err := s.resolve(ctx, pa.Name, m)
		if err != nil {
			return "", "", err
		}
		res = &api.TagResolution{Tag: m.OCI, ResolveToken: m.ResolveToken, Digest: r.Pinned.DigestStr(), SHA256: r.SHA256,
			ResolvedAt: metav1.Now(), Replica: s.l.replica}
		if res, err = recordResolution(ctx, s, pa.Name, m, res); err != nil {
			return "", "", err
		}
		s.l.logger.Info("Policy tag resolved: its digest loads until the tag or the resolve token changes", "policy", pa.Name,
			"oci", m.OCI, "digest", res.Digest, "module", res.SHA256, "resolvedBy", res.Replica)
	}
	pinned := api.Revision{Module: m}.Resolved(res).Module
	return pinned.OCI, pinned.SHA256, nil
}

// resolve reads what a static policy's tag names now.
func (s *staticStore) resolve(ctx context.Context, name string, m api.Module) (source.OCIResolution, error) {
	var keychain func(context.Context) (authn.Keychain, error)
	if secret := m.PullSecret; secret != "" {
		keychain = func(ctx context.Context) (authn.Keychain, error) {
			return pullSecret(ctx, s.l.opts.Client, s.namespace, secret)
		}
	}
	return s.l.ociFetcher().resolve(ctx, m.OCI, m.SHA256, keychain)
}

// failingSource reports one error and waits.
type failingSource struct{ err error }

func (f failingSource) Run(ctx context.Context, h source.Handlers) {
	h.Error(f.err)
	<-ctx.Done()
}
