package interrupt_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmsched/wasmsched/host/interrupt"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// fixture returns testdata/<name>.wasm.
func fixture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".wasm"))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// fixtures lists the names of every testdata/*.wasm.
func fixtures(tb testing.TB) []string {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.wasm"))
	if err != nil || len(paths) == 0 {
		tb.Fatalf("no fixtures in testdata: %v", err)
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = strings.TrimSuffix(filepath.Base(p), ".wasm")
	}
	return names
}

// features are the wazero core features a fixture needs beyond the default
// (WebAssembly 2.0, which is what package engine runs).
var features = map[string]api.CoreFeatures{
	"threads":  api.CoreFeaturesV2 | experimental.CoreFeaturesThreads,
	"tailcall": api.CoreFeaturesV2 | experimental.CoreFeaturesTailCall,
}

func newRuntime(tb testing.TB, name string) wazero.Runtime {
	tb.Helper()
	ctx := context.Background()
	cfg := wazero.NewRuntimeConfig()
	if f, ok := features[name]; ok {
		cfg = cfg.WithCoreFeatures(f)
	}
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	tb.Cleanup(func() { _ = r.Close(ctx) })
	return r
}

func instrument(tb testing.TB, bin []byte) []byte {
	tb.Helper()
	out, err := interrupt.Instrument(bin, interrupt.Limits{})
	if err != nil {
		tb.Fatalf("Instrument: %v", err)
	}
	return out
}

// load instantiates fixture name, instrumented or not, in a runtime of its
// own. The imports fixture gets testdata/env.wasm as its "env".
func load(tb testing.TB, name string, instrumented bool) api.Module {
	tb.Helper()
	ctx := context.Background()
	r := newRuntime(tb, name)
	if name == "imports" {
		if _, err := r.InstantiateWithConfig(ctx, fixture(tb, "env"), wazero.NewModuleConfig().WithName("env")); err != nil {
			tb.Fatalf("instantiate env: %v", err)
		}
	}
	bin := fixture(tb, name)
	var ctl *control
	if instrumented {
		bin = instrument(tb, bin)
		ctl = hostYield(tb, r)
	}
	mod, err := r.InstantiateWithConfig(ctx, bin, wazero.NewModuleConfig().WithName(name))
	if err != nil {
		tb.Fatalf("instantiate %s (instrumented: %v): %v", name, instrumented, err)
	}
	if ctl != nil {
		controls.Store(mod, ctl)
	}
	return mod
}

// control is what the test's wasmsched.yield answers: the stand-in for
// host/engine's yield, which answers 1 once the call is past its deadline.
type control struct {
	stop      atomic.Uint64
	calls     atomic.Int64
	overflows atomic.Int64
}

func (c *control) Set(v uint64) { c.stop.Store(v) }

var controls sync.Map // api.Module -> *control

// hostYield instantiates the wasmsched.yield import in r.
func hostYield(tb testing.TB, r wazero.Runtime) *control {
	tb.Helper()
	c := &control{}
	_, err := r.NewHostModuleBuilder(interrupt.ImportModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
			c.calls.Add(1)
			if stack[0] == interrupt.YieldStackOverflow {
				c.overflows.Add(1)
			}
			stack[0] = c.stop.Load()
		}), []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}).
		Export(interrupt.ImportName).Instantiate(context.Background())
	if err != nil {
		tb.Fatalf("instantiate %s: %v", interrupt.ImportModule, err)
	}
	return c
}

// controlOf returns the control of an instrumented module.
func controlOf(tb testing.TB, mod api.Module) *control {
	tb.Helper()
	c, ok := controls.Load(mod)
	if !ok {
		tb.Fatalf("%s was not instrumented", mod.Name())
	}
	return c.(*control)
}

// A call that would never return ends with a trap soon after another
// goroutine makes the yield import answer 1 (control.Set).
func TestInterruptStopsRunawayCalls(t *testing.T) {
	const after = 20 * time.Millisecond
	for _, tc := range []struct {
		name, fixture, export string
		args                  []uint64
	}{
		{"infinite loop", "spin", "loop", nil},
		{"recursion without loops", "spin", "recurse", []uint64{90}},
		{"tail calls without loops", "tailcall", "forever", []uint64{0}},
		{"loop in a module with imported globals", "imports", "spin", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mod := load(t, tc.fixture, true)
			g := controlOf(t, mod)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			start := time.Now()
			go func() {
				defer wg.Done()
				select {
				case <-time.After(after):
					g.Set(1)
				case <-stop:
				}
			}()
			_, err := mod.ExportedFunction(tc.export).Call(context.Background(), tc.args...)
			elapsed := time.Since(start)
			close(stop)
			wg.Wait()
			if err == nil {
				t.Fatalf("%s returned without error", tc.export)
			}
			if !strings.Contains(err.Error(), "wasm error: unreachable") {
				t.Fatalf("error = %v, want the unreachable trap of the check", err)
			}
			if elapsed < after {
				t.Fatalf("returned after %v, before the interrupt at %v", elapsed, after)
			}
			t.Logf("interrupted after %v", elapsed)
		})
	}
}

// Function entries count toward the budget: a function without loops,
// called over and over, reaches the host within Budget calls, and a trap
// comes from the check and nothing else.
func TestInterruptChecksFunctionEntry(t *testing.T) {
	mod := load(t, "spin", true)
	g := controlOf(t, mod)
	answer := mod.ExportedFunction("answer")
	g.Set(1)
	trapped := 0
	for i := 1; i <= interrupt.Budget+1; i++ {
		if _, err := answer.Call(context.Background()); err != nil {
			if !strings.Contains(err.Error(), "unreachable") {
				t.Fatalf("call %d: err = %v, want the unreachable trap", i, err)
			}
			trapped = i
			break
		}
	}
	if trapped == 0 {
		t.Fatalf("%d calls with yield answering 1 never trapped", interrupt.Budget+1)
	}
	if g.calls.Load() != 1 {
		t.Fatalf("yield called %d times, want once", g.calls.Load())
	}
	g.Set(0)
	res, err := answer.Call(context.Background())
	if err != nil || res[0] != 42 {
		t.Fatalf("answer with yield answering 0 = %v, %v; want 42", res, err)
	}
}

// Instrumented modules compute what the originals compute.
func TestInstrumentPreservesBehaviour(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		fixture, export string
		args            []uint64
		want            []uint64 // nil: only compare with the original
	}{
		{"compute", "sum", []uint64{1000}, []uint64{500500}},
		{"compute", "sum", []uint64{0}, []uint64{0}},
		{"compute", "fact", []uint64{20}, []uint64{2432902008176640000}},
		{"compute", "primes", []uint64{1000}, []uint64{168}},
		{"compute", "collatz", []uint64{27}, []uint64{111}},
		{"spin", "recurse", []uint64{20}, []uint64{6765}},
		{"spin", "answer", nil, []uint64{42}},
		{"blocks", "divmod", []uint64{17, 5}, []uint64{3, 2}},
		{"blocks", "fib", []uint64{30}, []uint64{832040}},
		{"blocks", "machine", []uint64{10}, []uint64{14}},
		{"blocks", "parity", []uint64{1000}, []uint64{2000}},
		{"imports", "read", nil, []uint64{15}},
		{"simd", "mix", []uint64{50}, nil},
		{"bulk", "run", nil, nil},
		{"signext", "extend", []uint64{300}, nil},
		{"threads", "count", []uint64{100}, nil},
		{"tailcall", "countdown", []uint64{1_000_000}, []uint64{500000500000}},
		{"recurse", "run", []uint64{100}, []uint64{1000}},
		{"recurse", "deep", []uint64{1000}, []uint64{1000}},
		{"bulk_charge", "tgrow", []uint64{10}, []uint64{1}},
	} {
		t.Run(fmt.Sprintf("%s.%s%v", tc.fixture, tc.export, tc.args), func(t *testing.T) {
			var results [2][]uint64
			for i, instrumented := range []bool{false, true} {
				mod := load(t, tc.fixture, instrumented)
				res, err := mod.ExportedFunction(tc.export).Call(ctx, tc.args...)
				if err != nil {
					t.Fatalf("instrumented: %v: %v", instrumented, err)
				}
				results[i] = res
			}
			if !slices.Equal(results[0], results[1]) {
				t.Fatalf("original returned %v, instrumented %v", results[0], results[1])
			}
			if tc.want != nil && !slices.Equal(results[1], tc.want) {
				t.Fatalf("returned %v, want %v", results[1], tc.want)
			}
			t.Logf("%v", results[1])
		})
	}
}

// Every fixture, whatever sections and instructions it has, instruments into
// a module that wazero validates, compiles and instantiates against the
// wasmsched.yield import, with its header unchanged.
func TestInstrumentEveryFixture(t *testing.T) {
	for _, name := range fixtures(t) {
		if name == "taken" || name == "escape" {
			continue // refused on purpose: see TestInstrumentErrors and TestInstrumentStateUnreachable
		}
		t.Run(name, func(t *testing.T) {
			bin := fixture(t, name)
			out := instrument(t, bin)
			if !bytes.Equal(out[:8], bin[:8]) {
				t.Fatalf("header changed: % x", out[:8])
			}
			load(t, name, true)
			t.Logf("%d bytes -> %d bytes", len(bin), len(out))
		})
	}
}

// A module with no export section keeps none, and its start function runs
// instrumented.
func TestInstrumentWithoutExportSection(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(t, "noexport")
	hostYield(t, r)
	cm, err := r.CompileModule(ctx, instrument(t, fixture(t, "noexport")))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(cm.ExportedFunctions()) + len(cm.ExportedMemories()); n != 0 {
		t.Fatalf("%d function or memory exports, want none", n)
	}
	if _, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig()); err != nil {
		t.Fatalf("instantiate (runs the instrumented start function): %v", err)
	}
}

// checkPrefix is the inserted check up to the call of the yield import:
// budget -= 1; if budget == 0 { budget = Budget; call ...
func checkPrefix(global byte) []byte {
	return []byte{0x23, global, 0x41, 0x01, 0x6b, 0x24, global, 0x23, global, 0x45, 0x04, 0x40,
		0x41, 0x90, 0xce, 0x00, 0x24, global, 0x41, 0x00, 0x10}
}

// check is the whole check for a module whose yield import has index yield.
func check(global, yield byte) []byte {
	return append(checkPrefix(global), yield, 0x04, 0x40, 0x00, 0x0b, 0x0b)
}

// The check (see checkPrefix) is placed once at the entry of every function
// and once at the header of every loop.
func TestInstrumentPlacesChecks(t *testing.T) {
	for _, tc := range []struct {
		fixture      string
		global       byte
		funcs, loops int
	}{
		{"spin", 0, 2 + 1, 1},
		{"compute", 0, 4, 1 + 2 + 1},
		{"imports", 3, 2, 1},
		{"noexport", 1, 1, 1},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			out := instrument(t, fixture(t, tc.fixture))
			check := checkPrefix(tc.global)
			if got, want := bytes.Count(out, check), tc.funcs+tc.loops; got != want {
				t.Fatalf("%d checks on global %d, want %d (%d functions, %d loops)", got, tc.global, want, tc.funcs, tc.loops)
			}
			if got := bytes.Count(out, append([]byte{0x03, 0x40}, check...)); got != tc.loops {
				t.Fatalf("%d checks right after a loop header, want %d", got, tc.loops)
			}
		})
	}
}

// A real standard-Go guest (3 MB, every construct the Go compiler emits)
// instruments into a module that compiles, starts and answers.
func TestInstrumentGoModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go guest")
	}
	ctx := context.Background()
	bin := testwasm.Bytes(t, "examples/nodepin")
	out := instrument(t, bin)
	t.Logf("%d bytes -> %d bytes (+%.1f%%)", len(bin), len(out), 100*float64(len(out)-len(bin))/float64(len(bin)))

	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	orig, err := r.CompileModule(ctx, bin)
	if err != nil {
		t.Fatalf("original: %v", err)
	}
	cm, err := r.CompileModule(ctx, out)
	if err != nil {
		t.Fatalf("instrumented: %v", err)
	}
	if a, b := exportNames(orig), exportNames(cm); !slices.Equal(a, b) {
		t.Fatalf("exported functions changed: %v -> %v", a, b)
	}

	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	var yields atomic.Int64
	if _, err := r.NewHostModuleBuilder("wasmsched").NewFunctionBuilder().
		WithFunc(func(int32, int32, int32) {}).Export("log").
		NewFunctionBuilder().WithFunc(func(int32) int32 { yields.Add(1); return 0 }).Export("yield").
		Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	mod, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithStartFunctions("_initialize"))
	if err != nil {
		t.Fatalf("instantiate and _initialize: %v", err)
	}
	t.Logf("_initialize yielded %d times", yields.Load())
	res, err := mod.ExportedFunction("wasmsched_abi_version").Call(ctx)
	if err != nil || res[0] != 1 {
		t.Fatalf("wasmsched_abi_version = %v, %v; want 1", res, err)
	}
}

func exportNames(cm wazero.CompiledModule) []string {
	var names []string
	for name := range cm.ExportedFunctions() {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Binary-format helpers for the malformed modules below.

func module(sections ...[]byte) []byte {
	return slices.Concat(append([][]byte{[]byte("\x00asm\x01\x00\x00\x00")}, sections...)...)
}

func section(id byte, body ...byte) []byte {
	return append(uleb([]byte{id}, uint32(len(body))), body...)
}

// uleb appends v in LEB128.
func uleb(b []byte, v uint32) []byte {
	for ; v >= 0x80; v >>= 7 {
		b = append(b, byte(v)|0x80)
	}
	return append(b, byte(v))
}

// withBody is a module with one function of type [] -> [] whose body
// (locals and code) is given.
func withBody(body ...byte) []byte {
	return withBodies(body)
}

// withBodies is a module with functions of type [] -> [], one a body.
func withBodies(bodies ...[]byte) []byte {
	funcs := uleb(nil, uint32(len(bodies)))
	code := uleb(nil, uint32(len(bodies)))
	for _, b := range bodies {
		funcs = append(funcs, 0)
		code = append(uleb(code, uint32(len(b))), b...)
	}
	return module(section(1, 1, 0x60, 0, 0), section(3, funcs...), section(10, code...))
}

func TestInstrumentErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		bin  []byte
		want string
	}{
		{"empty", nil, "not a WebAssembly module (bad magic number)"},
		{"text format", []byte("(module)"), "not a WebAssembly module (bad magic number)"},
		{"header cut short", []byte("\x00asm\x01\x00"), "not a WebAssembly module (bad magic number)"},
		{"version 2", []byte("\x00asm\x02\x00\x00\x00"), "unsupported WebAssembly binary version 2"},
		{"component", []byte("\x00asm\x0d\x00\x01\x00"), "unsupported WebAssembly binary version 13"},
		{"section without size", module([]byte{1}), "section 1: unexpected end of data"},
		{"section size past the end", module([]byte{1, 10, 1, 0x60}), "section 1: unexpected end of data"},
		{"section size LEB128 too long", module([]byte{1, 0x80, 0x80, 0x80, 0x80, 0x80, 0}), "section 1: LEB128 value too long"},
		{"unknown section id", module(section(14)), "unknown section id 14"},
		{"import of unknown kind", module(section(2, 1, 1, 'm', 1, 'x', 0x05, 0)), "import section: import 0: unknown kind 0x5"},
		{"import section cut short", module(section(2, 2, 1, 'm', 1, 'g', 0x03, 0x7f, 0)), "import section: unexpected end of data"},
		{"empty global section", module(section(6)), "section 6: unexpected end of data"},
		{"empty export section", module(section(7)), "section 7: unexpected end of data"},
		{"function body past the section", module(section(10, 1, 10, 0, 0x0b)), "code section: function 0: unexpected end of data"},
		{"fewer functions than counted", module(section(1, 1, 0x60, 0, 0), section(3, 2, 0, 0), section(10, 2, 2, 0, 0x0b)), "code section: function 1: unexpected end of data"},
		{"trailing bytes in the code section", module(section(1, 1, 0x60, 0, 0), section(3, 1, 0), section(10, 1, 2, 0, 0x0b, 0)), "code section: trailing bytes after the last function"},
		{"more bodies than functions", module(section(1, 1, 0x60, 0, 0), section(3, 1, 0), section(10, 2, 2, 0, 0x0b, 2, 0, 0x0b)), "code section: 2 function bodies for 1 functions"},
		{"locals cut short", withBody(1), "code section: function 0: locals: unexpected end of data"},
		{"immediate cut short", withBody(0, 0x41), "code section: function 0: opcode 0x41 at offset 1: unexpected end of data"},
		{"unknown opcode", withBody(0, 0x06, 0x0b), "code section: function 0: opcode 0x6 at offset 1: unknown opcode"},
		{"unknown opcode 0xff", withBody(0, 0x01, 0xff, 0x0b), "code section: function 0: opcode 0xff at offset 2: unknown opcode"},
		{"unknown 0xfc sub-opcode", withBody(0, 0xfc, 18, 0x0b), "code section: function 0: opcode 0xfc at offset 1: unknown 0xfc sub-opcode 18"},
		{"unknown 0xfd sub-opcode", withBody(0, 0xfd, 0x94, 0x02, 0x0b), "code section: function 0: opcode 0xfd at offset 1: unknown 0xfd sub-opcode 276"},
		{"already imports the yield function", fixture(t, "taken"), `module already imports wasmsched.yield, a name reserved for the host`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := interrupt.Instrument(tc.bin, interrupt.Limits{})
			if err == nil {
				t.Fatalf("Instrument succeeded (%d bytes), want error %q", len(out), tc.want)
			}
			if err.Error() != tc.want {
				t.Fatalf("error = %q\nwant    %q", err, tc.want)
			}
			if out != nil {
				t.Fatalf("returned %d bytes with the error", len(out))
			}
		})
	}
}

// A function claiming 2^32-1 local groups in a few bytes is rejected at
// once; the loop over the groups once ran to the count (about 20 s).
func TestInstrumentHugeLocalCount(t *testing.T) {
	bin := withBody(0xff, 0xff, 0xff, 0xff, 0x0f)
	start := time.Now()
	_, err := interrupt.Instrument(bin, interrupt.Limits{})
	if err == nil || err.Error() != "code section: function 0: locals: unexpected end of data" {
		t.Fatalf("error = %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v", d)
	}
}

// Vector lengths and local counts that the module's bytes cannot back are
// refused before wazero sees them: wazero allocates what a vector declares
// before reading it, and 14 bytes declaring 2^28 exports made it allocate
// 16 GB and abort the process.
func TestInstrumentRefusesImpossibleCounts(t *testing.T) {
	max := []byte{0xff, 0xff, 0xff, 0xff, 0x0f} // 2^32-1
	lots := func(prefix ...byte) []byte { return append(prefix, max...) }
	tooMany := "vector of 4294967295 entries cannot fit in the 0 bytes left"
	locals := func(n uint32) []byte { return append(uleb([]byte{1}, n), 0x7f, 0x0b) } // one group of n i32
	many := make([][]byte, 90)
	for i := range many {
		many[i] = locals(49999)
	}
	for _, tc := range []struct {
		name string
		bin  []byte
		want string
	}{
		{"exports (the 14 bytes that crashed the host)", module(section(7, 0xff, 0xff, 0xff, 0x7f)), "section 7: vector of 268435455 entries cannot fit in the 0 bytes left"},
		{"types", module(section(1, max...)), "section 1: " + tooMany},
		{"parameters", module(section(1, lots(1, 0x60)...)), "section 1: " + tooMany},
		{"results", module(section(1, lots(1, 0x60, 0)...)), "section 1: " + tooMany},
		{"recursive type group", module(section(1, lots(1, 0x4e)...)), "section 1: " + tooMany},
		{"imports", module(section(2, max...)), "section 2: " + tooMany},
		{"functions", module(section(3, max...)), "section 3: " + tooMany},
		{"tables", module(section(4, max...)), "section 4: " + tooMany},
		{"memories", module(section(5, max...)), "section 5: " + tooMany},
		{"globals", module(section(6, max...)), "section 6: " + tooMany},
		{"elements", module(section(9, max...)), "section 9: " + tooMany},
		{"element function indices", module(section(9, lots(1, 0, 0x41, 0, 0x0b)...)), "section 9: " + tooMany},
		{"element expressions", module(section(9, lots(1, 5, 0x70)...)), "section 9: " + tooMany},
		{"data segments", module(section(11, max...)), "section 11: " + tooMany},
		{"data bytes", module(section(11, lots(1, 1)...)), "section 11: unexpected end of data"},
		{"function bodies", module(section(10, max...)), "section 10: " + tooMany},
		{"function names", module(section(0, lots(4, 'n', 'a', 'm', 'e', 1, 5)...)), "section 0: " + tooMany},
		{"local names", module(section(0, lots(4, 'n', 'a', 'm', 'e', 2, 7, 1, 0)...)), "section 0: " + tooMany},
		{"locals of a function", withBody(1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x7f, 0x0b), "section 10: function 0 declares 4294967295 locals, more than 50000"},
		{"locals in all", withBodies(many...), "section 10: the functions declare more than 4194304 locals in all"},
		{"unknown data segment kind", module(section(11, 1, 3)), "section 11: data segment 0: unknown kind 3"},
		{"unknown element segment kind", module(section(9, 1, 8)), "section 9: unknown element segment kind 8"},
		{"unknown type form", module(section(1, 1, 0x5f, 0, 0)), "section 1: unknown type form 0x5f"},
		{"unknown opcode in a constant expression", module(section(11, 1, 0, 0x06, 0x0b, 0)), "section 11: opcode 0x6 in a constant expression: unknown opcode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := interrupt.Instrument(tc.bin, interrupt.Limits{})
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error = %v\nwant    %s", err, tc.want)
			}
			if d := time.Since(start); d > time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}

	// The limits leave room: 49999 locals in each of 80 functions pass.
	if _, err := interrupt.Instrument(withBodies(many[:80]...), interrupt.Limits{}); err != nil {
		t.Fatalf("80 functions of 49999 locals: %v", err)
	}
	// Custom sections other than "name" are not wazero's business.
	if _, err := interrupt.Instrument(module(section(0, lots(3, 'f', 'o', 'o')...)), interrupt.Limits{}); err != nil {
		t.Fatalf("custom section: %v", err)
	}
}

// wazero decodes a reference type written with a prefix, (ref null func) as
// 0x63 0x70, wherever a value type may appear; Instrument must skip both
// bytes, or it inserts a check between them.
func TestInstrumentRefTypeEncodings(t *testing.T) {
	check := check(0, 0)
	for _, tc := range []struct {
		name    string
		body    []byte
		compile bool   // false: wazero v1.12 panics on the module itself
		want    []byte // must appear in the output
	}{
		{"local", []byte{1, 1, 0x63, 0x70, 0x0b}, true, []byte{1, 1, 0x63, 0x70, 0x23, 0x01}},
		{"loop result", []byte{0, 0x03, 0x63, 0x70, 0xd0, 0x70, 0x0b, 0x1a, 0x0b}, true, append([]byte{0x03, 0x63, 0x70}, check...)},
		{"block result", []byte{0, 0x02, 0x64, 0x70, 0x00, 0x0b, 0x1a, 0x0b}, true, slices.Concat(check, []byte{0x02, 0x40, 0x02, 0x64, 0x70, 0x00})},
		{"typed select", []byte{0, 0xd0, 0x70, 0xd0, 0x70, 0x41, 0x01, 0x1c, 0x01, 0x63, 0x70, 0x1a, 0x0b}, false,
			slices.Concat(check, []byte{0x02, 0x40, 0xd0, 0x70, 0xd0, 0x70, 0x41, 0x01, 0x1c, 0x01, 0x63, 0x70, 0x1a, 0x0b})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := instrument(t, withBody(tc.body...))
			if !bytes.Contains(out, tc.want) {
				t.Fatalf("output lacks % x", tc.want)
			}
			if got := bytes.Count(out, check); got != 1+bytes.Count(tc.body, []byte{0x03}) {
				t.Fatalf("%d checks", got)
			}
			if tc.compile {
				if _, err := newRuntime(t, "").CompileModule(context.Background(), out); err != nil {
					t.Fatalf("wazero: %v", err)
				}
			}
		})
	}
}

// Cutting a module anywhere but between two sections is an error that
// names the section cut; cutting between sections leaves a shorter module.
func TestInstrumentTruncated(t *testing.T) {
	bin := fixture(t, "compute")
	// Section boundaries, and the id of the section each byte belongs to.
	boundary := map[int]bool{8: true}
	owner := make([]byte, len(bin))
	for pos := 8; pos < len(bin); {
		id := bin[pos]
		size, n := 0, 0
		for shift := 0; ; shift += 7 {
			c := bin[pos+1+n]
			size |= int(c&0x7f) << shift
			n++
			if c&0x80 == 0 {
				break
			}
		}
		end := pos + 1 + n + size
		for i := pos; i < end; i++ {
			owner[i] = id
		}
		pos = end
		boundary[pos] = true
	}
	for cut := 8; cut < len(bin); cut++ {
		out, err := interrupt.Instrument(bin[:cut], interrupt.Limits{})
		if boundary[cut] {
			if err != nil {
				t.Errorf("cut at %d (between sections): %v", cut, err)
			}
			continue
		}
		want := fmt.Sprintf("section %d: unexpected end of data", owner[cut])
		if err == nil || err.Error() != want {
			t.Errorf("cut at %d: Instrument = %d bytes, %v; want error %q", cut, len(out), err, want)
		}
	}
}

// The .wasm fixtures are what wat2wasm makes of the .wat sources (see
// testdata/README.md). Skipped where wat2wasm is not installed.
func TestFixturesUpToDate(t *testing.T) {
	checkFixtures(t, "testdata")
}

func checkFixtures(t *testing.T, dir string) {
	wat2wasm, err := exec.LookPath("wat2wasm")
	if err != nil {
		t.Skip("wat2wasm not installed")
	}
	sources, _ := filepath.Glob(filepath.Join(dir, "*.wat"))
	tmp := filepath.Join(t.TempDir(), "out.wasm")
	for _, src := range sources {
		text, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		args := []string{src, "-o", tmp}
		if first, _, _ := strings.Cut(string(text), "\n"); strings.HasPrefix(first, ";; flags: ") {
			args = append(strings.Fields(strings.TrimPrefix(first, ";; flags: ")), args...)
		}
		if out, err := exec.Command(wat2wasm, args...).CombinedOutput(); err != nil {
			t.Errorf("wat2wasm %s: %v\n%s", src, err, out)
			continue
		}
		want, err := os.ReadFile(tmp)
		if err != nil {
			t.Fatal(err)
		}
		have, err := os.ReadFile(strings.TrimSuffix(src, ".wat") + ".wasm")
		if err != nil || !bytes.Equal(have, want) {
			t.Errorf("%s is stale or missing: regenerate it (testdata/README.md)", strings.TrimSuffix(src, ".wat")+".wasm")
		}
	}
}

// fuzzRuntime compiles fuzz inputs as the engine does (without debug
// information, which makes wazero decode custom sections); one per process
// is enough.
var fuzzRuntime = sync.OnceValue(func() wazero.Runtime {
	return wazero.NewRuntimeWithConfig(context.Background(), wazero.NewRuntimeConfig().WithDebugInfoEnabled(false))
})

// compile compiles bin with wazero (WebAssembly 2.0 features, the
// engine's) and reports what wazero panicked with, or else its error.
func compile(bin []byte) (panicked any, err error) {
	ctx := context.Background()
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	cm, err := fuzzRuntime().CompileModule(ctx, bin)
	if err == nil {
		_ = cm.Close(ctx)
	}
	return nil, err
}

// FuzzInstrument checks that Instrument never panics, that wazero compiles
// or cleanly rejects whatever it returns, that it never turns a module
// wazero accepts into one it rejects (nor refuses such a module, unless it
// already imports wasmsched.yield, the name Instrument reserves), and never
// turns a module wazero rejects into one it accepts.
//
// wazero sees the input itself only once every section passed Instrument's
// checks on counts (when Instrument succeeds, or fails later, in the export
// or code section): wazero allocates whatever a vector declares, so a few
// fuzzed bytes could make it take all the machine's memory (an early
// version of this target did). Inputs on which wazero panics before any
// instrumentation are wazero's bug, not Instrument's (the engine recovers
// from them): they are skipped.
func FuzzInstrument(f *testing.F) {
	for _, name := range fixtures(f) {
		f.Add(fixture(f, name))
	}
	f.Add(withBody(0, 0x41, 0x01, 0x1a, 0x0b))
	f.Add(withBody(1, 2, 0x7f, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b))
	f.Add(withBody(0, 0xd0, 0x70, 0xd0, 0x70, 0x41, 0x01, 0x1c, 0x01, 0x70, 0x1a, 0x0b))
	f.Add(withBody(0, 0x03, 0x40, 0x41, 0x00, 0x24, 0x00, 0x0c, 0x00, 0x0b, 0x0b)) // sets global 0: the budget's index
	f.Fuzz(func(t *testing.T, bin []byte) {
		out, err := interrupt.Instrument(bin, interrupt.Limits{})
		if err != nil {
			if out != nil {
				t.Fatalf("returned %d bytes with error %v", len(out), err)
			}
			rewriting := false
			for _, prefix := range []string{"code section: ", "export section: ", "start section: ", "element section: ", "global section: "} {
				rewriting = rewriting || strings.HasPrefix(err.Error(), prefix)
			}
			if !rewriting && err.Error() != reserved {
				return
			}
			p, verr := compile(bin)
			if p != nil {
				t.Skipf("wazero panics on the module itself: %v", p)
			}
			if verr == nil && err.Error() != reserved {
				t.Fatalf("wazero accepts the module, Instrument refuses it: %v", err)
			}
			return
		}
		p, cerr := compile(out)
		if p != nil {
			if orig, _ := compile(bin); orig != nil {
				t.Skipf("wazero panics on the module itself: %v", orig)
			}
			t.Fatalf("wazero panics on the instrumented module (not on the original): %v", p)
		}
		porig, verr := compile(bin)
		if porig == nil && verr == nil && cerr != nil {
			t.Fatalf("wazero accepts the module but not its instrumented form: %v", cerr)
		}
		// The other way round is the sandbox: a module that could name the
		// instrumentation's state (the budget global, the stack left) is
		// invalid, and must stay invalid once that state exists.
		if porig == nil && verr != nil && cerr == nil {
			t.Fatalf("wazero rejects the module (%v) but accepts its instrumented form", verr)
		}
	})
}

const reserved = "module already imports wasmsched.yield, a name reserved for the host"
