// Package engine runs policy modules under wazero: it validates and compiles
// a module once, instantiates sandboxed instances of it, and performs the ABI
// calls (abi/README.md) on an instance with a deadline.
//
// It owns the WebAssembly boundary: everything a guest returns is decoded
// and checked here, and every failure becomes a *CallError that names the
// policy, its version and the call. It knows nothing of Kubernetes.
//
// Sandbox: guests get WASI with no arguments, no environment, no files, no
// sockets, a no-op sleep and real clocks; memory is capped per instance; a
// call that overruns its deadline is interrupted (see package interrupt) and
// its instance must be discarded.
package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmsched/wasmsched/host/interrupt"
)

// ABIVersion is the ABI version this host speaks.
const ABIVersion = 1

// Defaults for Config.
const (
	DefaultMemoryLimit = 256 << 20
	DefaultCallTimeout = 200 * time.Millisecond
	DefaultInitTimeout = 10 * time.Second
	// MinMemoryLimit is what a standard Go guest needs to start.
	MinMemoryLimit = 8 << 20
)

// Config says how a module is run. The zero value is usable: every zero field
// takes its default.
type Config struct {
	// Name is the operator's name for the policy, used in errors and logs.
	Name string
	// MemoryLimit caps each instance's linear memory, in bytes (rounded
	// down to 64 KiB pages).
	MemoryLimit uint64
	// CallTimeout bounds every call but start-up.
	CallTimeout time.Duration
	// InitTimeout bounds _initialize and wasmsched_init.
	InitTimeout time.Duration
	// Cache is the compilation cache; nil means DefaultCache(). Loading
	// bytes found in the cache (a rollback, a second profile, a restart)
	// skips compilation.
	Cache wazero.CompilationCache
	// Log receives the guest's log lines (wasmsched.log). Nil discards them.
	Log func(level int32, msg string)
	// CompileTimeout and CompileMemory bound compiling the module (see
	// compiler.go); zero takes DefaultCompileTimeout and
	// DefaultCompileMemory.
	CompileTimeout time.Duration
	CompileMemory  uint64
}

func (c Config) withDefaults() Config {
	if c.MemoryLimit == 0 {
		c.MemoryLimit = DefaultMemoryLimit
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.InitTimeout == 0 {
		c.InitTimeout = DefaultInitTimeout
	}
	if c.CompileTimeout == 0 {
		c.CompileTimeout = DefaultCompileTimeout * raceSlowdown
	}
	if c.CompileMemory == 0 {
		c.CompileMemory = DefaultCompileMemory * min(raceSlowdown, 4)
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.MemoryLimit < MinMemoryLimit {
		errs = append(errs, fmt.Errorf("memory limit %d bytes is below the minimum of %d (8 MiB)", c.MemoryLimit, MinMemoryLimit))
	}
	if c.MemoryLimit > 4<<30 {
		errs = append(errs, fmt.Errorf("memory limit %d bytes exceeds the 4 GiB a 32-bit module can address", c.MemoryLimit))
	}
	if c.CallTimeout < time.Millisecond {
		errs = append(errs, fmt.Errorf("call timeout %v is below 1ms", c.CallTimeout))
	}
	if c.InitTimeout < time.Millisecond {
		errs = append(errs, fmt.Errorf("init timeout %v is below 1ms", c.InitTimeout))
	}
	return errors.Join(errs...)
}

// The exports a policy module must have, with their signatures.
var requiredExports = []struct {
	name    string
	params  []api.ValueType
	results []api.ValueType
}{
	{"wasmsched_abi_version", nil, []api.ValueType{api.ValueTypeI32}},
	{"wasmsched_buffer", []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}},
	{"wasmsched_result", nil, []api.ValueType{api.ValueTypeI64}},
	{"wasmsched_init", []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}},
	{"wasmsched_sync", []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}},
	{"wasmsched_cycle", []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}},
	{"wasmsched_filter", []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}},
	{"wasmsched_score", []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}},
	{"wasmsched_call", []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}},
}

// Module is a compiled policy module and the wazero runtime that owns it.
// It is safe for concurrent use; its instances are not.
type Module struct {
	cfg      Config
	digest   string
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	reactor  bool

	// linearLimit and limits are the parts of cfg.MemoryLimit (budgets).
	linearLimit uint64
	limits      interrupt.Limits

	mu     sync.Mutex
	closed bool
	live   map[*Instance]struct{}

	guest [numExports]guestTime
}

// Digest returns the sha256 of the module bytes as given, in hex.
func (m *Module) Digest() string { return m.digest }

// Version returns the short form of the digest used in messages.
func (m *Module) Version() string { return m.digest[:12] }

// Name returns the policy name from the Config.
func (m *Module) Name() string { return m.cfg.Name }

// Config returns the effective configuration.
func (m *Module) Config() Config { return m.cfg }

// Compile validates and compiles a module. Errors name what is wrong with
// the module: not WebAssembly, an import the sandbox does not offer, a
// missing or mistyped export.
func Compile(ctx context.Context, wasm []byte, cfg Config) (*Module, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("policy %s: %w", cfg.Name, err)
	}
	cfg = cfg.withDefaults()
	sum := sha256.Sum256(wasm)
	m := &Module{cfg: cfg, digest: hex.EncodeToString(sum[:]), live: map[*Instance]struct{}{}}
	fail := func(format string, args ...any) (*Module, error) {
		return nil, fmt.Errorf("policy %s@%s: %s", cfg.Name, m.Version(), fmt.Sprintf(format, args...))
	}

	m.linearLimit, m.limits = budgets(cfg.MemoryLimit)
	instrumented, err := interrupt.Instrument(wasm, m.limits)
	if err != nil {
		return fail("not a valid WebAssembly module: %v", err)
	}
	pages := uint32(m.linearLimit / 65536)
	rc := runtimeConfig(pages)
	cache, dir := cfg.Cache, ""
	if cache == nil {
		cache, dir = DefaultCache(), defaultCacheDir
	}
	if dir != "" {
		if err := compileInChild(ctx, instrumented, pages, dir, cfg); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("policy %s@%s: %w", cfg.Name, m.Version(), err)
			}
			return fail("not a valid WebAssembly module: %v", err)
		}
	}
	rc = rc.WithCompilationCache(cache)
	r := wazero.NewRuntimeWithConfig(ctx, rc)
	m.runtime = r
	ok := false
	defer func() {
		if !ok {
			_ = r.Close(ctx)
		}
	}()

	cm, err := compileModule(ctx, r, instrumented)
	if err != nil {
		return fail("not a valid WebAssembly module: %v", err)
	}
	m.compiled = cm
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		switch {
		case mod == "wasi_snapshot_preview1":
		case mod == "wasmsched" && name == "log":
		case mod == interrupt.ImportModule && name == interrupt.ImportName: // added by Instrument
		default:
			return fail("imports %s.%s, which the sandbox does not provide (allowed: wasi_snapshot_preview1.*, wasmsched.log)", mod, name)
		}
	}
	exports := cm.ExportedFunctions()
	for _, want := range requiredExports {
		f, found := exports[want.name]
		if !found {
			return fail("does not export %s: is it built with the wasmsched guest SDK as a reactor (-buildmode=c-shared)?", want.name)
		}
		if !sameTypes(f.ParamTypes(), want.params) || !sameTypes(f.ResultTypes(), want.results) {
			return fail("export %s has signature %s, want %s", want.name, signature(f.ParamTypes(), f.ResultTypes()), signature(want.params, want.results))
		}
	}
	if _, found := cm.ExportedMemories()["memory"]; !found {
		return fail("does not export its memory as \"memory\"")
	}
	_, m.reactor = exports["_initialize"]

	if err := exportWASI(ctx, r); err != nil {
		return fail("instantiate WASI: %v", err)
	}
	i32 := api.ValueTypeI32
	_, err = r.NewHostModuleBuilder(interrupt.ImportModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(m.guestLog), []api.ValueType{i32, i32, i32}, nil).
		Export("log").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(yield), []api.ValueType{i32}, []api.ValueType{i32}).
		Export(interrupt.ImportName).
		Instantiate(ctx)
	if err != nil {
		return fail("instantiate host functions: %v", err)
	}
	ok = true
	return m, nil
}

// compileModule is r.CompileModule with a panic turned into an error: the
// wazero v1.12 compiler panics on some modules its validator accepts (a
// typed select of (ref null func), encoded 0x1c 0x01 0x63 0x70), and a bad
// policy must not take the scheduler down with it.
func compileModule(ctx context.Context, r wazero.Runtime, bin []byte) (cm wazero.CompiledModule, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("wazero failed on it: %v", p)
		}
	}()
	return r.CompileModule(ctx, bin)
}

var (
	defaultCacheOnce sync.Once
	defaultCache     wazero.CompilationCache
	defaultCacheDir  string
)

// DefaultCache returns the process-wide compilation cache: on disk in
// $WASMSCHED_CACHE_DIR, else in the user cache directory
// (~/.cache/wasmsched/compiled), else in a new temporary directory, else in
// memory when no directory is writable (and then modules compile without
// the isolation of compiler.go). Compiled code in memory is
// reference-counted by wazero and freed when the last module using it
// closes; the disk copy survives for rollbacks and restarts.
func DefaultCache() wazero.CompilationCache {
	defaultCacheOnce.Do(func() {
		dirs := []func() string{
			func() string { return os.Getenv("WASMSCHED_CACHE_DIR") },
			func() string {
				base, _ := os.UserCacheDir()
				return filepath.Join(base, "wasmsched", "compiled")
			},
			func() string {
				tmp, _ := os.MkdirTemp("", "wasmsched-compiled-")
				return tmp
			},
		}
		for _, next := range dirs {
			dir := next()
			if dir == "" || os.MkdirAll(dir, 0o700) != nil {
				continue
			}
			if c, err := wazero.NewCompilationCacheWithDir(dir); err == nil {
				defaultCache, defaultCacheDir = c, dir
				return
			}
		}
		defaultCache = wazero.NewCompilationCache()
	})
	return defaultCache
}

// maxLogLine truncates guest log lines.
const maxLogLine = 4096

// budgets divides an instance's memory limit between what it counts: the
// wasm call stack (a sixteenth, between 256 KiB and 64 MiB, charged by
// frame estimates: see package interrupt), the tables (a sixteenth, 8 bytes
// an entry) and linear memory (the rest, in whole pages).
func budgets(limit uint64) (linear uint64, lim interrupt.Limits) {
	stack := min(max(limit/16, 256<<10), 64<<20)
	tables := limit / 16
	lim = interrupt.Limits{StackBytes: uint32(stack), TableEntries: uint32(tables / 8)}
	linear = (limit - stack - tables) / 65536 * 65536
	return linear, lim
}

// signature spells a function type the way the text format does:
// (i32) -> (i64).
func signature(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(out, ", ") + ")"
	}
	return names(params) + " -> " + names(results)
}

func sameTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Close closes every instance and releases the compiled code.
func (m *Module) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	m.live = nil
	m.mu.Unlock()
	return m.runtime.Close(ctx)
}

// Instances returns how many instances are open.
func (m *Module) Instances() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}
