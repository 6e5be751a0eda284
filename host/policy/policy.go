// Package policy runs one loaded version of a policy for the scheduler: it
// owns the compiled module, a pool of initialised instances, and the
// protocol that keeps each instance's resident node snapshot in sync with
// the scheduler's (abi/README.md, "Resident snapshot").
//
// Everything here speaks scheduler types (fwk.NodeInfo, *v1.Pod) on one
// side and the ABI on the other; it does not know about plugin arguments,
// profiles or failure policies, which belong to the bridge plugin and
// host/compose. Every error a call returns is an *engine.CallError.
package policy

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/clusterctx"
	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/pool"
)

// Options describe a policy version to load.
type Options struct {
	// Name is the operator's name for the policy.
	Name string
	// Wasm is the module binary.
	Wasm []byte
	// Settings are passed verbatim to the guest's settings hook (JSON).
	Settings []byte
	// Engine configures the sandbox; its Name is set from Name.
	Engine engine.Config
	// MaxInstances bounds the pool; 0 means DefaultMaxInstances().
	MaxInstances int
	// Stage, if set, is told each stage of Load as it begins
	// (StageCompiling, then StageInitialising), on Load's goroutine.
	Stage func(stage string)
}

// The stages of Load, as reported to Options.Stage.
const (
	// StageCompiling: validating and compiling the module.
	StageCompiling = "compiling"
	// StageInitialising: instantiating the first instance, running its
	// _initialize and passing it the settings.
	StageInitialising = "initialising"
)

// DefaultMaxInstances is twice GOMAXPROCS, at least 2: wasm calls are not
// preemptible, so at most GOMAXPROCS instances run at once, and the spare
// ones cover callers that hold an instance between calls.
func DefaultMaxInstances() int { return max(2, 2*runtime.GOMAXPROCS(0)) }

// Policy is one loaded, validated version of a policy. It is safe for
// concurrent use by any number of goroutines.
type Policy struct {
	name     string
	module   *engine.Module
	info     *abiv1.PolicyInfo
	settings []byte
	loadedAt time.Time
	pool     *pool.Pool[*member]

	handles handleTable
	nodes   nodeCache // whole NodeInfos
	usages  nodeCache // NodeUsages

	closing atomic.Bool
	stats   counters
	// scoresNodes: the module scores many nodes in one call; scoresRaw:
	// without normalising too; normalizesRaw: it normalises scores
	// without messages.
	scoresNodes, scoresRaw, normalizesRaw bool
	// memo is the raw scores of the last cycle scored through it
	// (memo.go).
	memo scoreMemo
	// usage: a node whose object did not change is sent as a NodeUsage.
	usage bool

	// context: the guest reads cluster objects or tenant usage, from
	// binding (see Bind).
	context bool
	binding atomic.Pointer[clusterctx.Binding]
	// view is what the version declared of the pod (PolicyInfo.signature):
	// all it is sent of one. Nil: it is sent whole pods.
	view *podView
	// onContextSync, when set (tests), sees each context request sent.
	onContextSync func(req []byte)
}

type counters struct {
	nodesSent, usageSent, podsSent atomic.Int64
	usageUnchanged                 atomic.Int64
	objectsSent, tenantUsageSent   atomic.Int64
}

// Stats counts the data sent to instances and the time spent in them since
// the version was loaded.
type Stats struct {
	// NodesSent counts node records sent whole (one per node per instance
	// that needed it), UsageSent the usage updates sent instead, PodsSent
	// cycle starts (pod installs). UsageUnchanged counts the usage updates
	// left unsent because the instance held the same usage under an
	// earlier generation.
	NodesSent, UsageSent, PodsSent int64
	UsageUnchanged                 int64
	// ObjectsSent counts cluster objects and their removals sent (one per
	// object per instance that needed it, however often the object
	// changed in between), TenantUsageSent tenant usage entries.
	ObjectsSent, TenantUsageSent int64
	// Guest is the time spent in each of the module's exports, over all
	// instances.
	Guest []engine.ExportTime
}

// Stats returns the counters.
func (p *Policy) Stats() Stats {
	return Stats{NodesSent: p.stats.nodesSent.Load(), UsageSent: p.stats.usageSent.Load(), PodsSent: p.stats.podsSent.Load(),
		UsageUnchanged: p.stats.usageUnchanged.Load(),
		ObjectsSent:    p.stats.objectsSent.Load(), TenantUsageSent: p.stats.tenantUsageSent.Load(), Guest: p.module.GuestTime()}
}

// member is a pool member: an instance and what the host knows it holds.
// Only the goroutine that took it from the pool touches it.
type member struct {
	in   *engine.Instance
	gens []int64 // NodeInfo generation held, by handle; 0 = none
	// objs is the node object last sent whole, by handle: while a node's
	// object stays the same, a new generation is only new usage.
	objs []*v1.Node
	// contents is the content id of the usage entry last sent, by handle
	// (encodedNode.content); 0 after a whole entry.
	contents []uint64
	cycle    uint64 // cycle whose pod is installed; 0 = none
	// cycleCode is PreFilter's verdict for that cycle; scoresFinal is set
	// when the guest flagged its raw scores final (no NormalizeScore),
	// noDetail when it flagged PreFilter's Result as holding nothing
	// beyond the code (nothing to fetch).
	cycleCode   abiv1.Code
	scoresFinal bool
	noDetail    bool
	// The last Filter rejection fetched: its sequence number and status.
	rejectSeq uint32
	rejected  Status
	handles   handleCache
	// ctx is what the instance holds of the policy's cluster context.
	ctx contextPosition
}

// Load compiles and validates a policy version and starts its first
// instance, so that every error a version can have at start-up (bad bytes,
// wrong ABI, missing exports, a trap in _initialize, rejected settings)
// surfaces here, not in a scheduling cycle.
//
// ctx bounds the load: it reaches engine.Compile and the first instance,
// and Load checks it between stages, so a load whose ctx is done returns an
// error wrapping ctx.Err() and keeps nothing. (A guest's _initialize and
// settings hook do not watch ctx: they run to their own init deadline.)
// The Policy returned does not keep ctx.
func Load(ctx context.Context, opts Options) (*Policy, error) {
	if opts.Name == "" {
		return nil, fmt.Errorf("policy name is empty")
	}
	stage := func(s string) {
		if opts.Stage != nil {
			opts.Stage(s)
		}
	}
	abandoned := func() error {
		return fmt.Errorf("policy %s: load abandoned: %w", opts.Name, ctx.Err())
	}
	if ctx.Err() != nil {
		return nil, abandoned()
	}
	opts.Engine.Name = opts.Name
	stage(StageCompiling)
	mod, err := engine.Compile(ctx, opts.Wasm, opts.Engine)
	if ctx.Err() != nil {
		// Abandoned, whatever Compile made of it: an error then is only
		// the symptom of the cancellation.
		if err == nil {
			_ = mod.Close(context.Background())
		}
		return nil, abandoned()
	}
	if err != nil {
		return nil, err
	}
	stage(StageInitialising)
	p := &Policy{
		name:     opts.Name,
		module:   mod,
		settings: append([]byte(nil), opts.Settings...),
		loadedAt: time.Now(),
	}
	first, info, err := p.newMember(ctx)
	if ctx.Err() != nil {
		// The module's instances close with it.
		_ = mod.Close(context.Background())
		return nil, abandoned()
	}
	if err != nil {
		_ = mod.Close(context.Background())
		return nil, err
	}
	p.info = info
	if info.GetPoints()&(1<<uint(abiv1.Point_POINT_SIGN)) == 0 {
		if p.view, err = compileView(info.GetSignature()); err != nil {
			first.in.Close(context.Background())
			_ = mod.Close(context.Background())
			return nil, p.CallError("init", engine.KindInvalid, err)
		}
	}
	p.scoresNodes = first.in.ScoresNodes()
	p.scoresRaw = first.in.ScoresNodesRaw()
	p.normalizesRaw = first.in.NormalizesScores()
	// With wants_pods the pod list changes with the usage: send it whole.
	p.usage = info.GetAcceptsUsage() && !info.GetWantsPods()
	p.context = readsContext(info)
	limit := opts.MaxInstances
	if limit <= 0 {
		limit = DefaultMaxInstances()
	}
	p.pool = pool.New(limit, func(ctx context.Context) (*member, error) {
		m, _, err := p.newMember(ctx)
		return m, err
	}, func(m *member) { m.in.Close(context.Background()) })
	p.pool.Seed(first)
	return p, nil
}

func (p *Policy) newMember(ctx context.Context) (*member, *abiv1.PolicyInfo, error) {
	in, err := p.module.NewInstance(ctx)
	if err != nil {
		return nil, nil, err
	}
	info, err := in.Init(p.name, p.settings)
	if err != nil {
		in.Close(ctx)
		return nil, nil, err
	}
	return &member{in: in}, info, nil
}

// Name returns the operator's name for the policy.
func (p *Policy) Name() string { return p.name }

// Digest returns the sha256 of the module, in hex.
func (p *Policy) Digest() string { return p.module.Digest() }

// Version returns the short digest used in messages.
func (p *Policy) Version() string { return p.module.Version() }

// LoadedAt returns when the version was loaded.
func (p *Policy) LoadedAt() time.Time { return p.loadedAt }

// Info returns what the guest declared at init.
func (p *Policy) Info() *abiv1.PolicyInfo { return p.info }

// Implements reports whether the guest implements an extension point.
func (p *Policy) Implements(pt abiv1.Point) bool { return p.info.Points&(1<<uint(pt)) != 0 }

// pointSet is pts as a PolicyInfo.points bit set.
func pointSet(pts ...abiv1.Point) uint64 {
	var s uint64
	for _, pt := range pts {
		s |= 1 << uint(pt)
	}
	return s
}

// groupPoints are the points called about a whole pod group or outside
// any cycle, never with a pod's CycleRequest.
var groupPoints = pointSet(abiv1.Point_POINT_PLACEMENT_GENERATE, abiv1.Point_POINT_PLACEMENT_SCORE,
	abiv1.Point_POINT_NORMALIZE_PLACEMENT_SCORE, abiv1.Point_POINT_POD_GROUP_POST_FILTER, abiv1.Point_POINT_SIGN)

// InPodCycles reports whether a pod's scheduling cycle calls the guest:
// it implements a point of the pod's cycle, or wants the whole snapshot
// (synced at PreFilter). A guest that only places pod groups does not.
func (p *Policy) InPodCycles() bool {
	return p.info.Points&^groupPoints != 0 || p.info.GetWantsAllNodes()
}

// Instances returns how many instances exist.
func (p *Policy) Instances() int { return p.pool.Size() }

// GuestMemory returns the linear memory of each idle instance, in bytes.
func (p *Policy) GuestMemory() []uint32 {
	var out []uint32
	for _, m := range p.pool.Idle() {
		out = append(out, m.in.MemoryBytes())
	}
	return out
}

// Usage reports how many calls have taken an instance and how many are in
// flight now; see Retire.
func (p *Policy) Usage() (calls uint64, inFlight int) { return p.pool.Usage() }

// Retire closes a version that has been replaced, once nothing uses it: no
// call in flight and no new call for idle, checked every poll, or after max
// at the latest (cycles still pinned to it then fail their calls, and the
// failure policy applies). It blocks; run it in its own goroutine.
func (p *Policy) Retire(ctx context.Context, idle, poll, maxWait time.Duration) error {
	deadline := time.Now().Add(maxWait)
	last, _ := p.Usage()
	quiet := time.Duration(0)
	for quiet < idle && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return p.Close(context.Background())
		case <-time.After(poll):
		}
		calls, busy := p.Usage()
		if calls == last && busy == 0 {
			quiet += poll
		} else {
			quiet, last = 0, calls
		}
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Close(closeCtx)
}

// Ping makes an empty call on an instance.
func (p *Policy) Ping(ctx context.Context) error {
	return p.with(ctx, "ping", func(m *member) error { return m.in.Ping() })
}

// Close stops handing out instances, waits up to the context's deadline for
// the ones in use to come back, and releases the module.
func (p *Policy) Close(ctx context.Context) error {
	if !p.closing.CompareAndSwap(false, true) {
		return nil
	}
	p.pool.Close()
	for p.pool.Size() > 0 {
		select {
		case <-ctx.Done():
			return p.module.Close(context.Background())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return p.module.Close(context.Background())
}

// with runs fn on a pool member and returns it, discarding it if it broke.
// When no member can be had for call, the error is a CallError of the
// kind that kept it: the failure of a new instance's start-up (its own
// CallError, whole), a closed pool, ctx's deadline, or else the host's.
func (p *Policy) with(ctx context.Context, call string, fn func(m *member) error) error {
	m, err := p.pool.Get(ctx)
	if err != nil {
		var ce *engine.CallError
		kind := engine.KindHost
		switch {
		case errors.As(err, &ce):
			return ce
		case errors.Is(err, pool.ErrClosed):
			kind = engine.KindClosed
		case errors.Is(err, context.DeadlineExceeded):
			kind = engine.KindTimeout
		}
		return p.CallError(call, kind, fmt.Errorf("no instance: %w", err))
	}
	err = fn(m)
	p.pool.Put(m, m.in.Broken())
	return err
}

// handleTable assigns each node name a small, stable handle. Every Filter
// and Score looks a handle up, from many goroutines at once, so reads take
// no lock and write nothing shared: they read an immutable map. New names
// go to a small locked map first; a new immutable map is built once the
// lookups that had to take the lock are a sizeable share of its size, so
// that a table of n names costs O(n) to build and no name stays on the
// locked path for long.
type handleTable struct {
	names atomic.Pointer[map[string]int32]

	mu    sync.Mutex
	fresh map[string]int32 // names not yet in names
	slow  int              // locked lookups since the last merge
	next  atomic.Int32     // written under mu
}

func (t *handleTable) get(name string) int32 {
	if h, ok := t.fast(name); ok {
		return h
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.slowLocked(name)
	if !ok {
		h = t.next.Add(1) - 1
		if t.fresh == nil {
			t.fresh = map[string]int32{}
		}
		t.fresh[name] = h
	}
	return h
}

// size returns the number of names with a handle.
func (t *handleTable) size() int32 { return t.next.Load() }

// lookup returns the handle of a node name that has one.
func (t *handleTable) lookup(name string) (int32, bool) {
	if h, ok := t.fast(name); ok {
		return h, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.slowLocked(name)
}

func (t *handleTable) fast(name string) (int32, bool) {
	if m := t.names.Load(); m != nil {
		h, ok := (*m)[name]
		return h, ok
	}
	return 0, false
}

// slowLocked looks name up under t.mu, merging the fresh names into a new
// immutable map when enough lookups came this way.
func (t *handleTable) slowLocked(name string) (int32, bool) {
	h, ok := t.fast(name)
	if !ok {
		h, ok = t.fresh[name]
	}
	t.slow++
	old := t.names.Load()
	size := 0
	if old != nil {
		size = len(*old)
	}
	if len(t.fresh) > 0 && t.slow >= max(64, size/4) {
		merged := make(map[string]int32, size+len(t.fresh))
		if old != nil {
			for k, v := range *old {
				merged[k] = v
			}
		}
		for k, v := range t.fresh {
			merged[k] = v
		}
		t.names.Store(&merged)
		t.fresh, t.slow = nil, 0
	}
	return h, ok
}

// CallError is the error of a call into this version: it names the policy,
// the version, the call and the kind of failure. Every failure of a policy
// call the host finds (not the engine: it builds its own) is made here.
func (p *Policy) CallError(call string, kind engine.Kind, err error) *engine.CallError {
	return &engine.CallError{Policy: p.name, Version: p.Version(), Call: call, Kind: kind, Err: err}
}
