package lifecycle

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/policy"
)

// Slot is one policy of a profile and the version it serves now. The
// version is swapped by the slot's loader (loader.go) as revisions arrive;
// a scheduling cycle keeps the version it started with (Current, read
// once).
//
// Its methods are safe for concurrent use.
type Slot struct {
	// static are the policy's arguments as configured (static policies)
	// or as first seen (SchedulingPolicies, whose later changes of weight,
	// failure policy and mode are in live: see Args).
	static  PolicyArgs
	live    atomic.Pointer[PolicyArgs]
	current atomic.Pointer[policy.Policy]
	// required: a cycle refuses pods while the slot has no version (a
	// static policy, a SchedulingPolicy named in the plugin's arguments),
	// unless the policy was deactivated on purpose (deactivated).
	required    bool
	deactivated atomic.Bool

	onChange func()
	// onSwap runs after a new version (or none) replaced a served one.
	onSwap func(policies ...string)
	// beforeInstall runs on the loader goroutine before a loaded version
	// starts serving, afterLoad after each load that ran to its end (err
	// nil: installed). The policy's entry uses them (revision.go).
	beforeInstall func(*request)
	afterLoad     func(*request, error)
	// missing, guarded by mu, says why a required slot has nothing to
	// load (its SchedulingPolicy does not exist, or its module cannot be
	// fetched), for NoVersionReason.
	missing string

	// bind binds a loaded version to what it reads of the cluster
	// (Options.Bind); nil: nothing to bind.
	bind BindFunc
	// check, when set, decides before a version compiles whether it may
	// load at all (the trust policy); its error refuses the version.
	check func(ctx context.Context, r *request) error

	// load hands revisions to the loader goroutine (loader.go).
	load loader

	mu     sync.Mutex
	status SlotStatus
}

// newSlot is the slot of policy pa.
func newSlot(pa PolicyArgs, required bool, bind BindFunc) *Slot {
	s := &Slot{static: pa, required: required, bind: bind}
	s.status = SlotStatus{Policy: pa.Name, Mode: pa.Mode, Weight: pa.Weight, FailurePolicy: pa.FailurePolicy, Source: publishedSource(pa.Source)}
	return s
}

// NewFixedSlot is a slot serving p, with no loader: for tests of code that
// reads rosters (Fixed), and for tools that run versions they loaded
// themselves. p may be nil (no version).
func NewFixedSlot(pa PolicyArgs, p *policy.Policy) *Slot {
	s := newSlot(pa, false, nil)
	s.current.Store(p)
	return s
}

// Name is the policy's name; it never changes.
func (s *Slot) Name() string { return s.static.Name }

// Args returns the arguments in force: weight, failure policy and mode can
// change without a reload (SchedulingPolicies); the name never changes.
// The result must not be modified.
func (s *Slot) Args() *PolicyArgs {
	if a := s.live.Load(); a != nil {
		return a
	}
	return &s.static
}

// hasVersion reports whether a version serves.
func (s *Slot) hasVersion() bool { return s.Current() != nil }

// setMissing records why a required slot has nothing to load ("": it has).
func (s *Slot) setMissing(why string) {
	s.mu.Lock()
	s.missing = why
	s.mu.Unlock()
}

// BlocksWithoutVersion reports whether pods must wait while the slot has no
// version: it is required, fails closed and was not deactivated.
// Otherwise a slot without a version is left out of cycles (and
// signatures).
func (s *Slot) BlocksWithoutVersion() bool {
	return s.required && !s.deactivated.Load() && s.Args().FailurePolicy == FailurePolicyFail
}

// Current returns the version the slot runs now.
func (s *Slot) Current() *policy.Policy { return s.current.Load() }

// swap installs a new version and returns the previous one.
func (s *Slot) swap(p *policy.Policy) *policy.Policy {
	old := s.current.Swap(p)
	if old != nil {
		activeVersion.DeleteLabelValues(s.Name(), old.Digest())
	}
	if p != nil {
		activeVersion.WithLabelValues(s.Name(), p.Digest()).Set(1)
	}
	return old
}

// BindFunc binds a loaded version to the cluster objects and usage it
// reads, after checking them against pa's allow-list; an error refuses
// the version. ctx bounds it; stage, if set, is told each stage as it
// begins.
type BindFunc func(ctx context.Context, pa *PolicyArgs, p *policy.Policy, stage func(string)) error

// loadVersion compiles, validates and starts a policy version, and binds
// it (bind, if set). ctx bounds the load (policy.Load) and the binding;
// stage, if set, is told each stage as it begins.
func loadVersion(ctx context.Context, logger klog.Logger, pa PolicyArgs, wasm []byte, stage func(string), bind BindFunc) (*policy.Policy, error) {
	start := time.Now()
	cfg := pa.EngineConfig()
	name := pa.Name
	cfg.Log = func(level int32, msg string) {
		switch {
		case level >= 8:
			logger.Error(nil, msg, "policy", name)
		case level >= 4:
			logger.V(4).Info(msg, "policy", name)
		default:
			logger.Info(msg, "policy", name)
		}
	}
	p, err := policy.Load(ctx, policy.Options{Name: name, Wasm: wasm, Settings: pa.Settings, Engine: cfg, MaxInstances: pa.MaxInstances, Stage: stage})
	if err != nil {
		if ctx.Err() != nil {
			// Superseded or shut down: the caller says which.
			logger.V(2).Info("Policy load abandoned", "policy", name, "duration", time.Since(start))
			return nil, err
		}
		logger.Error(err, "Policy rejected", "policy", name)
		return nil, err
	}
	if bind != nil {
		if err := bind(ctx, &pa, p, stage); err != nil {
			_ = p.Close(context.Background())
			if ctx.Err() != nil {
				logger.V(2).Info("Policy load abandoned", "policy", name, "duration", time.Since(start))
				return nil, err
			}
			logger.Error(err, "Policy rejected", "policy", name, "digest", p.Digest())
			return nil, err
		}
	}
	logger.Info("Policy loaded", "policy", name, "digest", p.Digest(), "points", pointList(p), "wantsPods", p.Info().WantsPods,
		"wantsAllNodes", p.Info().WantsAllNodes, "context", p.ContextKinds(), "duration", time.Since(start))
	return p, nil
}

func pointList(p *policy.Policy) string {
	var out []string
	for pt := abiv1.Point_POINT_PRE_FILTER; pt <= abiv1.Point_POINT_POST_BIND; pt++ {
		if p.Implements(pt) {
			out = append(out, engine.PointName(pt))
		}
	}
	for _, pt := range []abiv1.Point{abiv1.Point_POINT_PLACEMENT_GENERATE, abiv1.Point_POINT_PLACEMENT_SCORE, abiv1.Point_POINT_NORMALIZE_PLACEMENT_SCORE, abiv1.Point_POINT_POD_GROUP_POST_FILTER} {
		if p.Implements(pt) {
			out = append(out, engine.PointName(pt))
		}
	}
	return strings.Join(out, ",")
}
