package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/engine"
)

// allocated runs fn and returns how many bytes the process allocated
// meanwhile (runtime.MemStats.TotalAlloc: wazero's stacks, tables and
// buffers are Go allocations).
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A module that names the instrumentation's budget global by the index it
// gets is refused when it loads, naming the index: it cannot reset its own
// budget and run past its deadline.
func TestSandboxStateUnreachable(t *testing.T) {
	_, err := engine.Compile(context.Background(), guest(t, "filter_escape"), engine.Config{Name: "filter_escape"})
	want := "policy filter_escape@" + version(guest(t, "filter_escape")) + ": not a valid WebAssembly module: code section: function 6: opcode 0x24 at offset 7: global index 1 out of range (1 globals)"
	if err == nil || err.Error() != want {
		t.Fatalf("Compile = %v\nwant %s", err, want)
	}
}

// Endless recursion without a loop ends at the stack limit, a sixteenth of
// the memory limit, as a stack overflow, having allocated a few times that
// (wazero doubles its stack as it grows), not the hundreds of MB wazero's
// own ceiling allows.
func TestSandboxBoundsTheStack(t *testing.T) {
	for _, limit := range []uint64{engine.MinMemoryLimit, engine.DefaultMemoryLimit} {
		// A deadline far off: recursing through 16 MiB of stack takes
		// longer than the default 200ms under -race on a busy machine,
		// and this test is about the stack limit.
		in := start(t, "filter_stack", engine.Config{Name: "filter_stack", MemoryLimit: limit, CallTimeout: 20 * time.Second})
		var err error
		alloc := allocated(func() { _, _, err = in.Filter(0) })
		want := "stack overflow: the call stack went past its limit of " + strconv.FormatUint(min(max(limit/16, 256<<10), 64<<20)>>10, 10) + " KiB"
		wantCallError(t, err, "filter_stack", "filter", engine.KindStack, want)
		t.Logf("memory limit %d MiB: %d KiB allocated", limit>>20, alloc>>10)
		if bound := limit / 2; alloc > bound {
			t.Fatalf("memory limit %d MiB: the overflowing call allocated %d MiB, more than %d MiB", limit>>20, alloc>>20, bound>>20)
		}
	}
}

// A guest with its own stack in linear memory (as TinyGo keeps it) that
// recurses past it traps out of bounds with its stack pointer wrapped below
// 0: reported as a stack overflow, of kind stack.
func TestSandboxLinearStackOverflow(t *testing.T) {
	in := start(t, "filter_linear_stack", engine.Config{Name: "filter_linear_stack", MemoryLimit: engine.MinMemoryLimit})
	_, _, err := in.Filter(0)
	wantCallError(t, err, "filter_linear_stack", "filter", engine.KindStack,
		"stack overflow: the guest's own stack in linear memory ran out (wasm error: out of bounds memory access)")
}

// table.grow by 2^29 entries (4 GiB of references) is refused inside the
// guest: the table's maximum is its part of the memory limit.
func TestSandboxBoundsTables(t *testing.T) {
	in := start(t, "filter_tables", engine.Config{Name: "filter_tables", MemoryLimit: engine.MinMemoryLimit})
	var (
		code abiv1.Code
		err  error
	)
	alloc := allocated(func() { code, _, err = in.Filter(0) })
	if err != nil || code != abiv1.Code_CODE_UNSCHEDULABLE {
		t.Fatalf("Filter = %v, %v; want UNSCHEDULABLE (table.grow answered -1)", code, err)
	}
	if alloc > 1<<20 {
		t.Fatalf("a refused table.grow allocated %d KiB", alloc>>10)
	}
}

// One memory.copy of 64 MiB in a loop is charged by its bytes: the call
// stops near its deadline, not after 10000 iterations (about 90 s here).
func TestSandboxChargesBulkWork(t *testing.T) {
	in := start(t, "filter_bulk", engine.Config{Name: "filter_bulk", CallTimeout: 50 * time.Millisecond})
	start := time.Now()
	_, _, err := in.Filter(0)
	took := time.Since(start)
	wantCallError(t, err, "filter_bulk", "filter", engine.KindTimeout, "deadline of 50ms exceeded")
	t.Logf("stopped after %v", took)
	if took > 10*time.Second {
		t.Fatalf("stopped after %v", took)
	}
}

// Every import a guest can flood stops at the deadline: fd_write of a
// million 64 MiB buffers (stderr and stdout), random_get of 64 MiB,
// poll_oneoff of a million subscriptions, and log lines, of which at most
// 64 KiB reach the log.
func TestSandboxBoundsHostCalls(t *testing.T) {
	for h, what := range []string{"fd_write to stderr", "fd_write to stdout", "random_get", "poll_oneoff", "wasmsched.log"} {
		t.Run(what, func(t *testing.T) {
			var (
				mu     sync.Mutex
				logged int
				lines  []string
			)
			timeout := 50 * time.Millisecond
			if what == "wasmsched.log" {
				// Long enough for the guest to log past the 64 KiB bound
				// (17 lines of 4 KiB) even when a loaded machine leaves it
				// little of the time.
				timeout = time.Second
			}
			cfg := engine.Config{Name: "filter_hostcalls", CallTimeout: timeout, Log: func(_ int32, msg string) {
				mu.Lock()
				defer mu.Unlock()
				logged += len(msg)
				lines = append(lines, msg)
			}}
			in := start(t, "filter_hostcalls", cfg)
			start := time.Now()
			_, _, err := in.Filter(int32(h))
			took := time.Since(start)
			wantCallError(t, err, "filter_hostcalls", "filter", engine.KindTimeout, fmt.Sprintf("deadline of %v exceeded", timeout))
			t.Logf("stopped after %v, %d bytes logged", took, logged)
			if took > 10*time.Second {
				t.Fatalf("stopped after %v", took)
			}
			if what == "wasmsched.log" {
				mu.Lock()
				defer mu.Unlock()
				if logged > 64<<10+200 {
					t.Fatalf("%d bytes logged in one call", logged)
				}
				if len(lines) == 0 {
					t.Fatalf("nothing logged in %v", took)
				}
				if last := lines[len(lines)-1]; !strings.Contains(last, "log lines dropped: more than 65536 bytes logged in one call") {
					t.Fatalf("last log line %q, want the count of dropped lines", last)
				}
			}
		})
	}
}
