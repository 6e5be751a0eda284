package engine

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/interrupt"
)

// MaxMessage bounds any message a guest returns and any request the host
// writes (64 MiB).
const MaxMessage = 64 << 20

// Reasons travel into pod conditions, Events and logs, which cannot hold
// megabytes: the host keeps at most MaxReasons reasons of a verdict and at
// most MaxReasonBytes bytes of each, and says what it cut.
const (
	MaxReasons     = 16
	MaxReasonBytes = 1024
)

// clipReasons applies MaxReasons and MaxReasonBytes, in place.
func clipReasons(rs []string) []string {
	if len(rs) > MaxReasons {
		more := len(rs) - MaxReasons + 1
		rs = append(rs[:MaxReasons-1], fmt.Sprintf("(%d more reasons cut)", more))
	}
	for i, r := range rs {
		if len(r) <= MaxReasonBytes {
			continue
		}
		cut := MaxReasonBytes
		for cut > 0 && !utf8.RuneStart(r[cut]) {
			cut--
		}
		rs[i] = fmt.Sprintf("%s... (%d bytes cut)", r[:cut], len(r)-cut)
	}
	return rs
}

// Instance is one sandboxed instance of a Module. It is not safe for
// concurrent use: one goroutine at a time may call it (the pool in package
// policy guarantees that). After any call returns an error the instance is
// Broken and must be closed, never called again.
type Instance struct {
	m      *Module
	mod    api.Module
	mem    api.Memory
	ctx    context.Context // carries the instance to the host functions
	memory any             // what backs mem where the host reserves it (memory_linux.go); nil for wazero's own
	stderr *tail

	// fns are the module's exports by kind; optional ones (_initialize,
	// wasmsched_score_nodes) are nil when absent.
	fns   [numExports]api.Function
	stack [2]uint64

	deadline atomic.Int64 // when the current call expires (see deadline.go); 0 when idle
	expired  atomic.Bool  // a check found the current call past its deadline
	overflow atomic.Bool  // the call stack went past its limit
	broken   bool

	// logged and logDropped count the current call's log bytes and the
	// lines dropped past maxLogPerCall.
	logged, logDropped int
}

// NewInstance instantiates the module, runs the reactor's _initialize and
// checks the ABI version. The instance still needs Init.
func (m *Module) NewInstance(ctx context.Context) (*Instance, error) {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, m.errorf("instantiate", KindClosed, errors.New("module is closed"))
	}
	in := &Instance{m: m}
	in.stderr = &tail{in: in, keep: true}
	in.ctx = context.WithValue(context.Background(), instanceKey{}, in)
	in.ctx = experimental.WithMemoryAllocator(in.ctx, newMemoryAllocator(in))
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(). // _initialize is called below, under a deadline
		WithStdout(&tail{in: in}).
		WithStderr(in.stderr).
		WithSysWalltime().
		WithSysNanotime().
		WithRandSource(rand.Reader)
	// A start function runs inside InstantiateModule: give it the init
	// deadline too.
	in.deadline.Store(deadline(m.cfg.InitTimeout))
	mod, err := m.runtime.InstantiateModule(in.ctx, m.compiled, cfg)
	in.deadline.Store(0)
	if err != nil {
		if in.expired.Load() {
			return nil, m.errorf("instantiate", KindTimeout, fmt.Errorf("start function: deadline of %v exceeded", m.cfg.InitTimeout))
		}
		return nil, m.errorf("instantiate", KindTrap, err)
	}
	in.mod = mod
	in.mem = mod.Memory()
	for x, name := range exportNames {
		in.fns[x] = mod.ExportedFunction(name)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		_ = mod.Close(ctx)
		return nil, m.errorf("instantiate", KindClosed, errors.New("module is closed"))
	}
	m.live[in] = struct{}{}
	m.mu.Unlock()

	if m.reactor {
		if _, err := in.invoke("_initialize", exportInitialize, m.cfg.InitTimeout); err != nil {
			in.Close(ctx)
			return nil, err
		}
	}
	v, err := in.invoke("abi_version", exportABIVersion, m.cfg.InitTimeout)
	if err != nil {
		in.Close(ctx)
		return nil, err
	}
	if uint32(v) != ABIVersion {
		in.Close(ctx)
		return nil, m.errorf("abi_version", KindABI, fmt.Errorf("module speaks ABI version %d, this scheduler speaks ABI version %d", uint32(v), ABIVersion))
	}
	return in, nil
}

// Ping makes the cheapest possible call (wasmsched_abi_version): a health
// check, and the measure of the bare cost of crossing the boundary.
func (in *Instance) Ping() error {
	_, err := in.invoke("abi_version", exportABIVersion, in.m.cfg.CallTimeout)
	return err
}

// MarkBroken discards the instance at its next return to the pool: the host
// found its state inconsistent.
func (in *Instance) MarkBroken() { in.broken = true }

// Broken reports whether the instance failed and must be discarded.
func (in *Instance) Broken() bool { return in.broken || in.expired.Load() }

// MemoryBytes returns the current size of the instance's linear memory.
func (in *Instance) MemoryBytes() uint32 { return in.mem.Size() }

// Close releases the instance.
func (in *Instance) Close(ctx context.Context) {
	in.m.mu.Lock()
	delete(in.m.live, in)
	in.m.mu.Unlock()
	_ = in.mod.Close(ctx)
}

// instanceKey finds the calling instance in the context of a host function.
type instanceKey struct{}

// invoke calls export x with the arguments in in.stack and returns the
// first result, turning traps, deadlines and closed modules into
// *CallError. It adds the call's duration to the module's guest time.
func (in *Instance) invoke(call string, x export, timeout time.Duration) (uint64, error) {
	if in.broken || in.expired.Load() {
		in.broken = true
		return 0, in.m.errorf(call, KindBroken, errors.New("instance already failed"))
	}
	in.logged, in.logDropped = 0, 0
	in.deadline.Store(deadline(timeout))
	start := time.Now()
	err := in.fns[x].CallWithStack(in.ctx, in.stack[:])
	took := time.Since(start)
	in.m.guest[x].add(took)
	in.deadline.Store(0)
	if in.logDropped > 0 && in.m.cfg.Log != nil {
		in.m.cfg.Log(1, fmt.Sprintf("(%d log lines dropped: more than %d bytes logged in one call)", in.logDropped, maxLogPerCall))
	}
	if err != nil {
		in.broken = true
		if in.overflow.Load() {
			return 0, in.m.errorf(call, KindStack, fmt.Errorf("stack overflow: the call stack went past its limit of %d KiB", in.m.limits.StackBytes>>10))
		}
		if in.expired.Load() {
			err := fmt.Errorf("deadline of %v exceeded", timeout)
			if took > 2*timeout+100*time.Millisecond {
				// Say so when the stop came late (a loaded machine, one
				// bulk instruction over the whole memory).
				err = fmt.Errorf("deadline of %v exceeded (stopped after %v)", timeout, took.Round(time.Millisecond))
			}
			return 0, in.m.errorf(call, KindTimeout, err)
		}
		msg := err.Error()
		if i := strings.Index(msg, "\nwasm stack trace"); i >= 0 {
			msg = msg[:i]
		}
		why := in.stderr.summary()
		if why != "" {
			msg += ": " + why
		}
		kind := KindTrap
		limit := in.m.linearLimit
		switch {
		case strings.Contains(why, "stack overflow") || strings.Contains(why, "goroutine stack exceeds"):
			kind = KindStack
		case strings.Contains(msg, "out of bounds memory access") && in.linearStackExhausted():
			kind = KindStack
			msg = "stack overflow: the guest's own stack in linear memory ran out (" + msg + ")"
		case strings.Contains(why, "out of memory") || uint64(in.mem.Size()) > limit/10*9:
			kind = KindMemory
			msg += fmt.Sprintf(" (linear memory %d bytes, limit %d of memoryLimit %d: the memory limit was reached)", in.mem.Size(), limit, in.m.cfg.MemoryLimit)
		}
		return 0, in.m.errorf(call, kind, errors.New(msg))
	}
	return in.stack[0], nil
}

// linearStackExhausted reports whether the guest keeps a stack in linear
// memory (package interrupt exports its pointer) and that pointer is near 0
// or wrapped below it: an LLVM-built guest (TinyGo) places its stack first
// in memory, growing down, so a recursion too deep for it traps as an
// access out of bounds with the pointer there.
func (in *Instance) linearStackExhausted() bool {
	g := in.mod.ExportedGlobal(interrupt.StackPointerExport)
	if g == nil {
		return false
	}
	sp := uint32(g.Get())
	return sp < 4096 || sp > 0xffff0000
}

// write copies a request into the guest's input buffer and returns its
// length. The guest makes the buffer under timeout, the deadline of the
// call the request is for: growing memory for a large sync (and a Go
// guest's collection on the way) is part of that bulk work.
func (in *Instance) write(call string, data []byte, timeout time.Duration) (uint32, error) {
	if len(data) > MaxMessage {
		return 0, in.m.errorf(call, KindInvalid, fmt.Errorf("request of %d bytes exceeds %d", len(data), MaxMessage))
	}
	in.stack[0] = uint64(len(data))
	ptr, err := in.invoke(call+": buffer", exportBuffer, timeout)
	if err != nil {
		return 0, err
	}
	if !in.mem.Write(uint32(ptr), data) {
		in.broken = true
		return 0, in.m.errorf(call, KindInvalid, fmt.Errorf("wasmsched_buffer returned %#x, outside the module's memory for %d bytes", uint32(ptr), len(data)))
	}
	return uint32(len(data)), nil
}

// marshaler is implemented by every generated ABI message.
type marshaler interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
}

// Marshal encodes an ABI message.
func Marshal(msg marshaler) []byte {
	b := make([]byte, msg.SizeVT())
	if _, err := msg.MarshalToSizedBufferVT(b); err != nil {
		panic(err) // only fails on a buffer of the wrong size
	}
	return b
}

// code checks a status code returned by the guest.
func (in *Instance) code(call string, v uint64) (abiv1.Code, error) {
	c := abiv1.Code(uint32(v))
	if c < abiv1.Code_CODE_SUCCESS || c > abiv1.Code_CODE_PENDING {
		in.broken = true
		return abiv1.Code_CODE_INVALID, in.m.errorf(call, KindInvalid, fmt.Errorf("returned status code %d, which is not a valid code", uint32(v)))
	}
	return c, nil
}

// Init sends the InitRequest and returns the guest's PolicyInfo. A guest
// that rejects its settings answers with a non-success code and reasons,
// which Init returns as a *CallError of KindRejected.
func (in *Instance) Init(policyName string, settings []byte) (*abiv1.PolicyInfo, error) {
	req := Marshal(&abiv1.InitRequest{HostAbiVersion: ABIVersion, PolicyName: policyName, Settings: settings, CycleFlags: true})
	n, err := in.write("init", req, in.m.cfg.InitTimeout)
	if err != nil {
		return nil, err
	}
	in.stack[0] = uint64(n)
	v, err := in.invoke("init", exportInit, in.m.cfg.InitTimeout)
	if err != nil {
		return nil, err
	}
	code, err := in.code("init", v)
	if err != nil {
		return nil, err
	}
	raw, err := in.readResult("init")
	if err != nil {
		return nil, err
	}
	info := &abiv1.PolicyInfo{}
	if err := info.UnmarshalVT(raw); err != nil {
		in.broken = true
		return nil, in.m.errorf("init", KindInvalid, fmt.Errorf("undecodable PolicyInfo: %v", err))
	}
	info.Reasons = clipReasons(info.Reasons)
	if code != abiv1.Code_CODE_SUCCESS || info.Code != abiv1.Code_CODE_SUCCESS {
		reason := strings.Join(info.Reasons, "; ")
		if reason == "" {
			reason = "no reason given"
		}
		return nil, in.m.errorf("init", KindRejected, errors.New(reason))
	}
	if info.AbiVersion != ABIVersion {
		return nil, in.m.errorf("init", KindABI, fmt.Errorf("module declares ABI version %d, this scheduler speaks ABI version %d", info.AbiVersion, ABIVersion))
	}
	return info, nil
}

// readResult returns a view of the guest's detail for the last call. The
// view is only valid until the next call.
func (in *Instance) readResult(call string) ([]byte, error) {
	v, err := in.invoke(call+": result", exportResult, in.m.cfg.CallTimeout)
	if err != nil {
		return nil, err
	}
	ptr, size := uint32(v>>32), uint32(v)
	if size == 0 {
		return nil, nil
	}
	if size > MaxMessage {
		in.broken = true
		return nil, in.m.errorf(call, KindInvalid, fmt.Errorf("result of %d bytes exceeds the %d byte limit", size, MaxMessage))
	}
	b, ok := in.mem.Read(ptr, size)
	if !ok {
		in.broken = true
		return nil, in.m.errorf(call, KindInvalid, fmt.Errorf("result at %#x+%d lies outside the module's memory", ptr, size))
	}
	return b, nil
}

// Result fetches and decodes the detail of the last call.
func (in *Instance) Result(call string) (*abiv1.Result, error) {
	raw, err := in.readResult(call)
	if err != nil {
		return nil, err
	}
	r := &abiv1.Result{}
	if err := r.UnmarshalVT(raw); err != nil {
		in.broken = true
		return nil, in.m.errorf(call, KindInvalid, fmt.Errorf("undecodable Result: %v", err))
	}
	r.Reasons = clipReasons(r.Reasons)
	for _, a := range r.Actions {
		if a != nil && len(a.Reason) > MaxReasonBytes {
			a.Reason = clipReasons([]string{a.Reason})[0]
		}
	}
	return r, nil
}

// send writes a request and calls fn with its length.
func (in *Instance) send(call string, x export, req []byte, timeout time.Duration) (abiv1.Code, error) {
	n, err := in.write(call, req, timeout)
	if err != nil {
		return abiv1.Code_CODE_INVALID, err
	}
	in.stack[0] = uint64(n)
	v, err := in.invoke(call, x, timeout)
	if err != nil {
		return abiv1.Code_CODE_INVALID, err
	}
	return in.code(call, v)
}

// Sync sends a marshalled NodeSync. A full sync of a large cluster is bulk
// work proportional to the cluster, so it runs under the init deadline.
func (in *Instance) Sync(req []byte) (abiv1.Code, error) {
	return in.send("sync", exportSync, req, in.m.cfg.InitTimeout)
}

// CycleFlags are the CycleFlag bits a guest set above the status code in
// its answer to wasmsched_cycle, those this host knows.
type CycleFlags uint32

const knownCycleFlags = CycleFlags(abiv1.CycleFlag_CYCLE_FLAG_SCORES_FINAL | abiv1.CycleFlag_CYCLE_FLAG_NO_DETAIL)

// ScoresFinal: the cycle's raw scores need no NormalizeScore.
func (f CycleFlags) ScoresFinal() bool {
	return f&CycleFlags(abiv1.CycleFlag_CYCLE_FLAG_SCORES_FINAL) != 0
}

// NoDetail: PreFilter's Result says nothing its code does not; there is
// nothing to fetch.
func (f CycleFlags) NoDetail() bool {
	return f&CycleFlags(abiv1.CycleFlag_CYCLE_FLAG_NO_DETAIL) != 0
}

// Cycle sends a marshalled CycleRequest; the code is PreFilter's, and flags
// what the guest said about the cycle (CycleFlags). Flag bits this host
// does not know are ignored.
func (in *Instance) Cycle(req []byte) (code abiv1.Code, flags CycleFlags, err error) {
	n, err := in.write("cycle", req, in.m.cfg.CallTimeout)
	if err != nil {
		return abiv1.Code_CODE_INVALID, 0, err
	}
	in.stack[0] = uint64(n)
	v, err := in.invoke("cycle", exportCycle, in.m.cfg.CallTimeout)
	if err != nil {
		return abiv1.Code_CODE_INVALID, 0, err
	}
	if code, err = in.code("cycle", v&0xff); err != nil {
		return code, 0, err
	}
	return code, CycleFlags(uint32(v)) & knownCycleFlags, nil
}

// Call sends a marshalled request for one of the message-carrying points.
func (in *Instance) Call(point abiv1.Point, req []byte) (abiv1.Code, error) {
	name := PointName(point)
	n, err := in.write(name, req, in.m.cfg.CallTimeout)
	if err != nil {
		return abiv1.Code_CODE_INVALID, err
	}
	in.stack[0] = uint64(point)
	in.stack[1] = uint64(n)
	v, err := in.invoke(name, exportCall, in.m.cfg.CallTimeout)
	if err != nil {
		return abiv1.Code_CODE_INVALID, err
	}
	return in.code(name, v)
}

// Filter runs Filter on the resident node with handle h. For a rejection,
// seq identifies the reasons: equal to the previous call's seq when the
// reasons are unchanged (see abi/README.md).
func (in *Instance) Filter(h int32) (code abiv1.Code, seq uint32, err error) {
	in.stack[0] = uint64(uint32(h))
	v, err := in.invoke("filter", exportFilter, in.m.cfg.CallTimeout)
	if err != nil {
		return abiv1.Code_CODE_INVALID, 0, err
	}
	code, err = in.code("filter", v>>32)
	return code, uint32(v), err
}

// Score runs Score on the resident node with handle h.
func (in *Instance) Score(h int32) (int64, abiv1.Code, error) {
	in.stack[0] = uint64(uint32(h))
	v, err := in.invoke("score", exportScore, in.m.cfg.CallTimeout)
	if err != nil {
		return 0, abiv1.Code_CODE_INVALID, err
	}
	code, err := in.code("score", v>>32)
	return int64(int32(uint32(v))), code, err
}

// ScoresNodes reports whether the module scores many nodes in one call
// (it exports the optional wasmsched_score_nodes).
func (in *Instance) ScoresNodes() bool { return in.fns[exportScoreNodes] != nil }

// ScoreNodes runs Score on each resident node of hs and then NormalizeScore
// over them, in one call, and returns the final scores, in the order of hs.
// When the guest's Score on hs[bad], or its NormalizeScore (bad ==
// len(hs)), answers a non-success code, it returns that code and bad; the
// reasons are the call's detail (Result). Only for modules that ScoresNodes.
func (in *Instance) ScoreNodes(hs []int32) (scores []int64, code abiv1.Code, bad int, err error) {
	return in.scoreNodes("score_nodes", exportScoreNodes, hs, nil)
}

// ScoresNodesRaw reports whether the module also scores many nodes in one
// call without normalising (the optional wasmsched_score_nodes_raw).
func (in *Instance) ScoresNodesRaw() bool { return in.fns[exportScoreNodesRaw] != nil }

// ScoreNodesRaw is ScoreNodes without the guest's NormalizeScore: the raw
// scores, in the order of hs. Only for modules that ScoresNodesRaw.
func (in *Instance) ScoreNodesRaw(hs []int32) (scores []int64, code abiv1.Code, bad int, err error) {
	return in.scoreNodes("score_nodes_raw", exportScoreNodesRaw, hs, nil)
}

// NormalizesScores reports whether the module normalises scores without
// messages (it exports the optional wasmsched_normalize_scores).
func (in *Instance) NormalizesScores() bool { return in.fns[exportNormalizeScores] != nil }

// NormalizeScores runs the guest's NormalizeScore over the resident nodes
// of hs with the raw scores raw, and returns the final scores in the order
// of hs. When the guest answers a non-success code it returns that code and
// bad == len(hs) (or the index of a node the guest does not hold); the
// reasons are the call's detail (Result). Only for modules that
// NormalizesScores.
func (in *Instance) NormalizeScores(hs []int32, raw []int64) (scores []int64, code abiv1.Code, bad int, err error) {
	req := make([]byte, 12*len(hs))
	for i, v := range raw {
		binary.LittleEndian.PutUint64(req[4*len(hs)+8*i:], uint64(v))
	}
	// Failures name the point, as through wasmsched_call: operators and
	// tests read "normalize_score" whichever export served it.
	return in.scoreNodes("normalize_score", exportNormalizeScores, hs, req)
}

// scoreNodes calls x with the handles hs written at the start of req (the
// rest of req is the caller's) and reads the len(hs) scores it answers.
func (in *Instance) scoreNodes(call string, x export, hs []int32, req []byte) (scores []int64, code abiv1.Code, bad int, err error) {
	if req == nil {
		req = make([]byte, 4*len(hs))
	}
	for i, h := range hs {
		binary.LittleEndian.PutUint32(req[4*i:], uint32(h))
	}
	if _, err := in.write(call, req, in.m.cfg.CallTimeout); err != nil {
		return nil, abiv1.Code_CODE_INVALID, -1, err
	}
	in.stack[0] = uint64(len(hs))
	v, err := in.invoke(call, x, in.m.cfg.CallTimeout)
	if err != nil {
		return nil, abiv1.Code_CODE_INVALID, -1, err
	}
	if code, err = in.code(call, v>>32); err != nil {
		return nil, code, -1, err
	}
	if code != abiv1.Code_CODE_SUCCESS {
		if int(uint32(v)) > len(hs) {
			in.broken = true
			return nil, abiv1.Code_CODE_INVALID, -1, in.m.errorf(call, KindInvalid, fmt.Errorf("answered code %d for node %d of %d", code, uint32(v), len(hs)))
		}
		return nil, code, int(uint32(v)), nil
	}
	scores = make([]int64, len(hs))
	if len(hs) == 0 {
		return scores, code, -1, nil
	}
	raw, ok := in.mem.Read(uint32(v), uint32(8*len(hs)))
	if !ok {
		in.broken = true
		return nil, abiv1.Code_CODE_INVALID, -1, in.m.errorf(call, KindInvalid, fmt.Errorf("scores at %#x+%d lie outside the module's memory", uint32(v), 8*len(hs)))
	}
	for i := range scores {
		scores[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
	}
	return scores, code, -1, nil
}

var pointNames = map[abiv1.Point]string{
	abiv1.Point_POINT_PRE_FILTER:                "pre_filter",
	abiv1.Point_POINT_FILTER:                    "filter",
	abiv1.Point_POINT_POST_FILTER:               "post_filter",
	abiv1.Point_POINT_PRE_SCORE:                 "pre_score",
	abiv1.Point_POINT_SCORE:                     "score",
	abiv1.Point_POINT_NORMALIZE_SCORE:           "normalize_score",
	abiv1.Point_POINT_RESERVE:                   "reserve",
	abiv1.Point_POINT_UNRESERVE:                 "unreserve",
	abiv1.Point_POINT_PERMIT:                    "permit",
	abiv1.Point_POINT_PRE_BIND:                  "pre_bind",
	abiv1.Point_POINT_POST_BIND:                 "post_bind",
	abiv1.Point_POINT_POD_CHANGES:               "pod_changes",
	abiv1.Point_POINT_SELECT_VICTIMS:            "select_victims",
	abiv1.Point_POINT_PLACEMENT_GENERATE:        "placement_generate",
	abiv1.Point_POINT_PLACEMENT_SCORE:           "placement_score",
	abiv1.Point_POINT_NORMALIZE_PLACEMENT_SCORE: "normalize_placement_score",
	abiv1.Point_POINT_POD_GROUP_POST_FILTER:     "pod_group_post_filter",
}

// PointName returns the snake_case name of an extension point.
func PointName(p abiv1.Point) string {
	if n, ok := pointNames[p]; ok {
		return n
	}
	return fmt.Sprintf("point_%d", int32(p))
}

// Kind classifies call failures.
type Kind string

const (
	KindTrap     Kind = "trap"     // the guest trapped (panic, unreachable, ...)
	KindTimeout  Kind = "timeout"  // the call overran its deadline
	KindMemory   Kind = "memory"   // the guest ran out of its memory limit
	KindStack    Kind = "stack"    // the guest's call stack overflowed
	KindInvalid  Kind = "invalid"  // the guest broke the ABI (bad code, bad message)
	KindABI      Kind = "abi"      // incompatible ABI version
	KindRejected Kind = "rejected" // the guest refused its settings
	KindGuest    Kind = "guest"    // the guest answered Error: a failure it reported itself
	KindBroken   Kind = "broken"   // the instance had already failed
	KindClosed   Kind = "closed"   // the module was closed
	KindHost     Kind = "host"     // the host could not make the call (no instance could be had)
)

// CallError is a failure of a call into a policy.
type CallError struct {
	Policy  string
	Version string
	Call    string
	Kind    Kind
	Err     error
}

func (e *CallError) Error() string {
	return fmt.Sprintf("policy %s@%s: %s: %v", e.Policy, e.Version, e.Call, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }

func (m *Module) errorf(call string, kind Kind, err error) *CallError {
	return &CallError{Policy: m.cfg.Name, Version: m.Version(), Call: call, Kind: kind, Err: err}
}
