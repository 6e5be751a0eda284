package plugin

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/compose"
	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/policy"
)

// Slot is one configured policy and the version it currently runs. The
// version can be swapped at any time (hot reload); a cycle keeps the
// version it started with.
//
// Its methods are safe for concurrent use.
type Slot struct {
	// Args are the policy's arguments as configured (static policies) or
	// as first seen (SchedulingPolicies, whose later changes of weight,
	// failure policy and mode are in live: see args).
	Args    PolicyArgs
	live    atomic.Pointer[PolicyArgs]
	current atomic.Pointer[policy.Policy]
	// required: a cycle refuses pods while the slot has no version (a
	// SchedulingPolicy named in the plugin's arguments).
	required bool
	metrics  map[abiv1.Point]*pointMetrics

	// lastFilter is the entry of the last cycle that ran this policy's
	// Filter; share averages how much of the snapshot recent cycles asked
	// about. See batchFilters.
	lastFilter atomic.Pointer[compose.Entry]
	share      filterShare

	namespace string
	recorder  events.EventRecorder
	onChange  func()
	// onSwap runs after a new version (or none) replaced a served one.
	onSwap func(policies ...string)
	// beforeInstall runs on the loader goroutine before a loaded version
	// starts serving, afterLoad after each load that ran to its end (err
	// nil: installed). A SchedulingPolicy's slot uses them (catalog.go).
	beforeInstall func(*request)
	afterLoad     func(*request, error)
	// missing, guarded by mu, says why a required slot has nothing to
	// load (its SchedulingPolicy does not exist, or its module cannot be
	// fetched), for noVersionReason.
	missing string

	// cluster is what versions may read of the cluster (context.go); nil
	// without a scheduler.
	cluster *clusterContext

	// load hands versions from the source to the loader goroutine
	// (loader.go).
	load loader

	mu     sync.Mutex
	status SlotStatus
}

// args returns the arguments in force: weight, failure policy and mode can
// change without a reload (SchedulingPolicies); the name never changes.
func (s *Slot) args() *PolicyArgs {
	if a := s.live.Load(); a != nil {
		return a
	}
	return &s.Args
}

// hasVersion reports whether a version serves.
func (s *Slot) hasVersion() bool { return s.Current() != nil }

// setMissing records why a required slot has nothing to load ("": it has).
func (s *Slot) setMissing(why string) {
	s.mu.Lock()
	s.missing = why
	s.mu.Unlock()
}

// blocksWithoutVersion reports whether pods must wait while the slot has no
// version: it is required and fails closed. Otherwise a slot without a
// version is left out of cycles (and signatures).
func (s *Slot) blocksWithoutVersion() bool {
	return s.required && s.args().FailurePolicy == FailurePolicyFail
}

// Current returns the version the slot runs now.
func (s *Slot) Current() *policy.Policy { return s.current.Load() }

// Swap installs a new version and returns the previous one.
func (s *Slot) Swap(p *policy.Policy) *policy.Policy {
	old := s.current.Swap(p)
	if old != nil {
		activeVersion.DeleteLabelValues(s.Args.Name, old.Digest())
	}
	if p != nil {
		activeVersion.WithLabelValues(s.Args.Name, p.Digest()).Set(1)
	}
	return old
}

// member is the slot's policy in a cycle's composition, at version v.
func (s *Slot) member(v *policy.Policy) compose.Member {
	a := s.args()
	return compose.Member{
		Name:        s.Args.Name,
		Version:     v,
		Weight:      a.Weight,
		Ignore:      a.FailurePolicy == FailurePolicyIgnore,
		Observer:    s,
		BatchFilter: s.batchFilters,
	}
}

// batchFilters decides whether e's cycle, over nodes snapshot nodes,
// filters with this policy in one batch: while the scheduler asks about at
// least half of the nodes (averaged over recent cycles). A batch judges
// every node, one call costing less than half of a call made alone (no
// waiting for an instance); when other plugins reject most nodes before
// this one (NodeResourcesFit rejects the nodes without GPUs for a GPU pod)
// or the scheduler stops early, node by node is cheaper. It runs once per
// filtering cycle, and cycles run one at a time.
func (s *Slot) batchFilters(e *compose.Entry, nodes int) bool {
	prev := s.lastFilter.Swap(e)
	if prev == nil {
		return s.share.next(0, 0)
	}
	return s.share.next(prev.Asked())
}

// filterShare is 1 + the share of the snapshot (thousandths) the scheduler
// asked Filter about, averaged over recent cycles; 0 before the first.
type filterShare struct{ v atomic.Int64 }

// next folds the previous filtering cycle (asked Filter calls over nodes
// snapshot nodes; nodes 0 for none) into the average and reports whether
// the next cycle should batch: while the average is at least one half, or
// nothing is known yet.
func (f *filterShare) next(asked int64, nodes int) bool {
	share := f.v.Load() - 1
	if nodes > 0 {
		sample := min(1000, asked*1000/int64(nodes))
		if share < 0 {
			share = sample
		} else {
			share = (3*share + sample) / 4
		}
		f.v.Store(share + 1)
	}
	return share < 0 || share >= 500
}

// loadVersion compiles, validates and starts a policy version, and binds
// it to the cluster objects and usage it reads (bindContext; cc nil: it
// may read none). ctx bounds the load (policy.Load) and the binding;
// stage, if set, is told each stage as it begins.
func loadVersion(ctx context.Context, logger klog.Logger, pa PolicyArgs, wasm []byte, stage func(string), cc *clusterContext) (*policy.Policy, error) {
	start := time.Now()
	cfg := pa.engineConfig()
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
	if err := bindContext(ctx, cc, &pa, p, stage); err != nil {
		_ = p.Close(context.Background())
		if ctx.Err() != nil {
			logger.V(2).Info("Policy load abandoned", "policy", name, "duration", time.Since(start))
			return nil, err
		}
		logger.Error(err, "Policy rejected", "policy", name, "digest", p.Digest())
		return nil, err
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
	return strings.Join(out, ",")
}
