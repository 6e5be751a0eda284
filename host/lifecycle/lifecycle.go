package lifecycle

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/host/compose"
	"github.com/wasmsched/wasmsched/host/source"
)

// Options are what a Lifecycle needs of the scheduler around it. Every
// field may be left unset where the scheduler has no such thing (tests):
// without Client there is no status, no ConfigMap source and no chunk.
type Options struct {
	// Profile is the scheduler profile the policies serve.
	Profile string
	// Client reads module chunks and static policies' ConfigMaps, and
	// writes status; Config makes the dynamic client SchedulingPolicies
	// are watched with.
	Client kubernetes.Interface
	Config *rest.Config
	// Recorder posts Events; EventsReady reports that the scheduler's
	// Event broadcaster runs (Events before it are held: events.go).
	Recorder    events.EventRecorder
	EventsReady func() bool
	// Bind binds each loaded version to what it reads of the cluster
	// before it serves; an error refuses the version.
	Bind BindFunc
	// OnSwap is told the policies whose version (or presence in the
	// roster) changed: the pods they rejected may fit now.
	OnSwap func(policies ...string)
	// ModuleCache keeps the modules of static policies' last good
	// revisions on disk; nil: DefaultModuleCache.
	ModuleCache *source.Cache
	// OCI is how registries are reached for modules named oci://...
	// (zero: the system roots, anonymously).
	OCI source.OCIOptions
	// NewSource makes a static policy's source; nil: from its arguments
	// (file, ConfigMaps, URL, OCI).
	NewSource func(pa PolicyArgs) source.Source
	Logger    klog.Logger
}

// Lifecycle is the policies one scheduler profile runs and the versions
// they serve. It is started once (Start), read by every scheduling cycle
// (Roster) and closed once (Close). Its methods are safe for concurrent
// use.
type Lifecycle struct {
	args    *Args
	opts    Options
	logger  klog.Logger
	replica string

	// trust checks versions before they compile; nil: no trust policy.
	trust *truster

	roster atomic.Pointer[Roster]
	cat    *catalog
	// statusCM publishes the profile's report in StatusConfigMap: its
	// static policies' slots, or how it selects SchedulingPolicies (whose
	// status is their own).
	statusCM *statusWriter
	stop     context.CancelFunc
}

// Start begins the lifecycle of the policies args declare (defaulted and
// validated: SetDefaults, Validate) and waits, up to a minute, for each
// policy's first version or its failure. A policy never stops the
// scheduler from starting: one that cannot serve blocks its profile's pods
// with the reason (or, with failurePolicy Ignore, is left out). Only a
// broken client configuration is an error.
func Start(args *Args, opts Options) (*Lifecycle, error) {
	RegisterMetrics()
	if opts.Logger.GetSink() == nil {
		opts.Logger = klog.Background().WithName(compose.Name)
	}
	l := &Lifecycle{args: args, opts: opts, logger: opts.Logger.WithValues("namespace", args.Namespace), replica: replicaName()}
	l.roster.Store(NewRoster(nil, nil))
	if l.opts.OCI.Transport == nil && args.RegistryCA != "" {
		t, err := registryTransport(args.RegistryCA)
		if err != nil {
			return nil, fmt.Errorf("%s: registryCA: %w", compose.Name, err)
		}
		l.opts.OCI.Transport = t
	}
	l.trust = newTruster(args, opts.Client, l.logger)
	var st store
	if args.SchedulingPolicies != nil {
		if opts.Config == nil {
			return nil, fmt.Errorf("%s: schedulingPolicies need the scheduler's client", compose.Name)
		}
		client, err := dynamic.NewForConfig(opts.Config)
		if err != nil {
			return nil, fmt.Errorf("%s: dynamic client: %w", compose.Name, err)
		}
		if l.opts.ModuleCache == nil {
			l.opts.ModuleCache = DefaultModuleCache(l.logger)
		}
		cs := newCRDStore(client, opts.Client, args, l.logger)
		cs.oci = l.ociFetcher()
		st = cs
		// Its policies report in their own status; the profile reports
		// how it selects them.
		l.statusCM = newStatusWriter(opts.Client, args.Namespace, opts.Profile, func() []*Slot { return nil }, args.SchedulingPolicies.DeepCopy())
	} else {
		if l.opts.ModuleCache == nil {
			l.opts.ModuleCache = DefaultModuleCache(l.logger)
		}
		l.statusCM = newStatusWriter(opts.Client, args.Namespace, opts.Profile, func() []*Slot { return l.Roster().Slots }, nil)
		st = newStaticStore(l)
	}
	// Sources and loaders live until Close.
	ctx, cancel := context.WithCancel(context.Background())
	l.stop = cancel
	l.cat = newCatalog(ctx, l, st)
	go l.statusCM.run(ctx)
	return l, nil
}

func (l *Lifecycle) ociFetcher() ociFetcher {
	return ociFetcher{cache: l.opts.ModuleCache, opts: l.opts.OCI, logger: l.logger}
}

// Roster returns the policies the profile runs now. A cycle reads it once
// and keeps what it read.
func (l *Lifecycle) Roster() *Roster { return l.roster.Load() }

// Close stops the sources, loaders and status publishing, and closes every
// version. A scheduler that stops cycles before Close is called never sees
// a closed version.
func (l *Lifecycle) Close() {
	l.stop()
	l.cat.close()
}

// swapped tells the scheduler which policies changed.
func (l *Lifecycle) swapped(policies ...string) {
	if l.opts.OnSwap != nil && len(policies) > 0 {
		l.opts.OnSwap(policies...)
	}
}

// slotChanged asks for the status ConfigMap to be written.
func (l *Lifecycle) slotChanged() { l.statusCM.touch() }

// probation is how long a new revision serves before it is the last good
// one.
func (l *Lifecycle) probation() time.Duration {
	if p := l.args.Probation; p != nil {
		return p.Duration
	}
	return defaultProbation
}

// replicaName is this scheduler replica in status: $WASMSCHED_REPLICA,
// else $POD_NAME, else the host name (a pod's name in Kubernetes).
func replicaName() string {
	for _, k := range []string{"WASMSCHED_REPLICA", "POD_NAME"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	h, _ := os.Hostname()
	return h
}

// DefaultModuleCache is the directory where static policies' last good
// modules are kept: "modules" in $WASMSCHED_CACHE_DIR (the compilation
// cache's volume in the Deployment), else in the user cache directory
// (~/.cache/wasmsched/modules). Nil when neither can be made: a restart
// then falls back only to modules the cluster still holds.
func DefaultModuleCache(logger klog.Logger) *source.Cache {
	var dirs []string
	if d := os.Getenv("WASMSCHED_CACHE_DIR"); d != "" {
		dirs = append(dirs, filepath.Join(d, "modules"))
	}
	if base, err := os.UserCacheDir(); err == nil {
		dirs = append(dirs, filepath.Join(base, "wasmsched", "modules"))
	}
	for _, d := range dirs {
		c, err := source.OpenCache(d)
		if err == nil {
			return c
		}
		logger.Error(err, "Module cache unavailable", "dir", d)
	}
	return nil
}
