package interrupt_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmsched/wasmsched/host/interrupt"
)

// loadWith instantiates fixture name instrumented with lim.
func loadWith(tb testing.TB, name string, lim interrupt.Limits) (api.Module, *control) {
	tb.Helper()
	ctx := context.Background()
	r := newRuntime(tb, name)
	out, err := interrupt.Instrument(fixture(tb, name), lim)
	if err != nil {
		tb.Fatalf("Instrument: %v", err)
	}
	ctl := hostYield(tb, r)
	mod, err := r.InstantiateWithConfig(ctx, out, wazero.NewModuleConfig().WithName(name))
	if err != nil {
		tb.Fatalf("instantiate %s: %v", name, err)
	}
	return mod, ctl
}

// The instrumentation's own globals and type cannot be named by the
// module: a loop that would reset the budget global by the index it gets
// (the attack that once ran a call forever, past every deadline) is
// refused, as is every other index the original module could not use.
func TestInstrumentStateUnreachable(t *testing.T) {
	// One type () -> (), one function; bodies are locals then code.
	oneFunc := func(body ...byte) []byte {
		return module(section(1, 1, 0x60, 0, 0), section(3, 1, 0), section(10, append(uleb([]byte{1}, uint32(len(body))), body...)...))
	}
	withGlobal := func(body ...byte) []byte {
		return module(section(1, 1, 0x60, 0, 0), section(3, 1, 0),
			section(6, 1, 0x7f, 0x01, 0x41, 0x00, 0x0b),
			section(10, append(uleb([]byte{1}, uint32(len(body))), body...)...))
	}
	for _, tc := range []struct {
		name string
		bin  []byte
		want string
	}{
		{"the loop of escape.wat", fixture(t, "escape"), "code section: function 0: opcode 0x24 at offset 7: global index 0 out of range (0 globals)"},
		{"global.get of the budget", oneFunc(0, 0x23, 0x00, 0x1a, 0x0b), "code section: function 0: opcode 0x23 at offset 1: global index 0 out of range (0 globals)"},
		{"global.set of the stack left", withGlobal(0, 0x41, 0x00, 0x24, 0x02, 0x0b), "code section: function 0: opcode 0x24 at offset 3: global index 2 out of range (1 globals)"},
		{"export of the budget", module(section(6, 1, 0x7f, 0x00, 0x41, 0x00, 0x0b), section(7, 1, 1, 'g', 0x03, 0x01)), "export section: export 0: global index 1 out of range (1 globals)"},
		{"global initialiser reading the budget", module(section(6, 1, 0x7f, 0x00, 0x23, 0x01, 0x0b)), "global section: global 0: global index 1 out of range (1 globals)"},
		{"data offset reading the budget", module(section(5, 1, 0, 1), section(11, 1, 0, 0x23, 0x00, 0x0b, 0)), "data section: data segment 0: global index 0 out of range (0 globals)"},
		{"call_indirect of the yield type", module(section(1, 1, 0x60, 0, 0), section(3, 1, 0), section(4, 1, 0x70, 0, 1),
			section(10, 1, 7, 0, 0x41, 0, 0x11, 0x01, 0x00, 0x0b)), "code section: function 0: opcode 0x11 at offset 3: type index 1 out of range (1 types)"},
		{"block of the yield type", oneFunc(0, 0x02, 0x01, 0x0b, 0x0b), "code section: function 0: opcode 0x2 at offset 1: type index 1 out of range (1 types)"},
		{"function of the yield type", module(section(1, 1, 0x60, 0, 0), section(3, 1, 1)), "function section: function 0: type index 1 out of range (1 types)"},
		{"the scratch local", oneFunc(0, 0x20, 0x00, 0x1a, 0x0b), "code section: function 0: opcode 0x20 at offset 1: local index 0 out of range (0 locals)"},
		{"a call of the yield import", oneFunc(0, 0x10, 0x01, 0x0b), "code section: function 0: opcode 0x10 at offset 1: function index 1 out of range (1 functions)"},
		{"code after the function's end", oneFunc(0, 0x0b, 0x01, 0x0b), "code section: function 0: opcode 0xb at offset 1: instructions after the function's end"},
		{"no end", oneFunc(0, 0x01), "code section: function 0: unexpected end of data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := interrupt.Instrument(tc.bin, interrupt.Limits{})
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Instrument = %d bytes, %v\nwant error %s", len(out), err, tc.want)
			}
			// And wazero refuses the original: the check refuses nothing valid.
			if _, err := newRuntime(t, "").CompileModule(context.Background(), tc.bin); err == nil {
				t.Fatalf("wazero accepts the original module")
			}
		})
	}
}

// A call stack deeper than Limits.StackBytes allows traps after calling
// yield(YieldStackOverflow), with or without loops, and every way out of a
// function gives its frame back: calls that return by return, br, br_table,
// falling off the end and with several results run any number of times
// under a limit of a few dozen frames.
func TestInstrumentBoundsTheStack(t *testing.T) {
	ctx := context.Background()
	frame := interrupt.FrameBytes(1, 0)
	lim := interrupt.Limits{StackBytes: 40 * frame}
	mod, ctl := loadWith(t, "recurse", lim)
	res, err := mod.ExportedFunction("run").Call(ctx, 10000)
	if err != nil || res[0] != 100000 {
		t.Fatalf("run(10000) = %v, %v; want 100000 (frames not given back?)", res, err)
	}
	if res, err := mod.ExportedFunction("deep").Call(ctx, 30); err != nil || res[0] != 30 {
		t.Fatalf("deep(30) = %v, %v; want 30", res, err)
	}
	for _, call := range []struct {
		name string
		args []uint64
	}{{"deep", []uint64{1000}}, {"forever", nil}} {
		mod, ctl = loadWith(t, "recurse", lim)
		_, err = mod.ExportedFunction(call.name).Call(ctx, call.args...)
		if err == nil || !strings.Contains(err.Error(), "unreachable") {
			t.Fatalf("%s: err = %v, want the unreachable trap after the overflow", call.name, err)
		}
		if n := ctl.overflows.Load(); n != 1 {
			t.Fatalf("%s: yield(YieldStackOverflow) called %d times, want 1", call.name, n)
		}
	}
}

// Bulk instructions are charged by their length: one memory.fill of 32 MiB
// reaches the host before it runs (and does not run when the host says
// stop), and a loop of large copies yields about once per Budget units of
// bytes moved, not once per Budget iterations.
func TestInstrumentChargesBulkWork(t *testing.T) {
	ctx := context.Background()
	mod, ctl := loadWith(t, "bulk_charge", interrupt.Limits{})
	ctl.Set(1)
	if _, err := mod.ExportedFunction("fill").Call(ctx, 32<<20); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("fill(32 MiB) with stop set: err = %v, want the unreachable trap", err)
	}
	if b, _ := mod.Memory().Read(0, 1); b[0] != 0 {
		t.Fatalf("memory filled (%d) although the call was stopped first", b[0])
	}
	// Small fills run untouched; a fill within the budget does not yield.
	ctl.Set(0)
	mod, ctl = loadWith(t, "bulk_charge", interrupt.Limits{})
	if _, err := mod.ExportedFunction("fill").Call(ctx, 1000); err != nil || ctl.calls.Load() != 0 {
		t.Fatalf("fill(1000) = %v, %d yields; want no error and no yield", err, ctl.calls.Load())
	}
	// A loop of 1 MiB copies: 16384 units each, so a yield per iteration.
	stop := time.AfterFunc(50*time.Millisecond, func() { ctl.Set(1) })
	defer stop.Stop()
	start := time.Now()
	_, err := mod.ExportedFunction("spin").Call(ctx, 1<<20)
	if err == nil {
		t.Fatal("spin returned")
	}
	iterations := ctl.calls.Load()
	t.Logf("stopped after %v, %d yields", time.Since(start), iterations)
	if iterations < 10 {
		t.Fatalf("%d yields in a loop of 1 MiB copies: bulk work is not charged", iterations)
	}
}

// Tables get a maximum within Limits.TableEntries: table.grow past it
// answers -1 inside the guest instead of allocating host memory, and a
// module whose tables need more at the start is refused.
func TestInstrumentBoundsTables(t *testing.T) {
	ctx := context.Background()
	mod, _ := loadWith(t, "bulk_charge", interrupt.Limits{TableEntries: 1000})
	grow := mod.ExportedFunction("tgrow")
	if res, err := grow.Call(ctx, 1<<27); err != nil || int32(res[0]) != -1 {
		t.Fatalf("table.grow by 2^27 = %v, %v; want -1", res, err)
	}
	if res, err := grow.Call(ctx, 999); err != nil || res[0] != 1 {
		t.Fatalf("table.grow by 999 = %v, %v; want 1 (the old size)", res, err)
	}
	if res, err := grow.Call(ctx, 1); err != nil || int32(res[0]) != -1 {
		t.Fatalf("table.grow past 1000 entries = %v, %v; want -1", res, err)
	}
	_, err := interrupt.Instrument(module(section(4, 1, 0x70, 0x00, 0xe9, 0x07)), interrupt.Limits{TableEntries: 1000})
	if want := "table section: the tables need at least 1001 entries, more than the 1000 the memory limit allows"; err == nil || err.Error() != want {
		t.Fatalf("table of 1001 entries: %v, want %s", err, want)
	}
}
