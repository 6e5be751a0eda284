package engine_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/engine"
)

// The guests in testdata are hand-written: good.wat implements the ABI in a
// few lines, and every other guest is good.wat with one thing wrong.

func guest(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".wasm"))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// version is what errors call a module: the first 12 hex digits of the
// sha256 of its bytes.
func version(bin []byte) string {
	sum := sha256.Sum256(bin)
	return hex.EncodeToString(sum[:])[:12]
}

// compile compiles testdata/<name>.wasm as the policy <name>.
func compile(t *testing.T, name string, cfg engine.Config) *engine.Module {
	t.Helper()
	cfg.Name = name
	m, err := engine.Compile(context.Background(), guest(t, name), cfg)
	if err != nil {
		t.Fatalf("Compile %s: %v", name, err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// start compiles the guest and returns an instance that passed Init.
func start(t *testing.T, name string, cfg engine.Config) *engine.Instance {
	t.Helper()
	m := compile(t, name, cfg)
	in, err := m.NewInstance(context.Background())
	if err != nil {
		t.Fatalf("NewInstance: %v", err)
	}
	t.Cleanup(func() { in.Close(context.Background()) })
	if _, err := in.Init(name, nil); err != nil {
		t.Fatalf("Init: %v", err)
	}
	return in
}

// wantCallError checks that err is a *CallError of the given kind, for the
// given call of policy <name> (testdata/<name>.wasm), and that its message
// reads "policy <name>@<version>: <call>: <something containing want>".
func wantCallError(t *testing.T, err error, name, call string, kind engine.Kind, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s error %q", kind, want)
	}
	var ce *engine.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("error %q is a %T, want *engine.CallError", err, err)
	}
	ver := version(guest(t, name))
	if ce.Kind != kind || ce.Policy != name || ce.Version != ver || ce.Call != call {
		t.Fatalf("error %q: kind %s, policy %s@%s, call %q; want %s, %s@%s, %q", err, ce.Kind, ce.Policy, ce.Version, ce.Call, kind, name, ver, call)
	}
	prefix := "policy " + name + "@" + ver + ": " + call + ": "
	if msg := err.Error(); !strings.HasPrefix(msg, prefix) || !strings.Contains(msg[len(prefix):], want) {
		t.Fatalf("error = %q\nwant      %q followed by %q", msg, prefix, want)
	}
}

// A request's buffer is made under the deadline of the call it is for: the
// init and a sync, bulk work, under the init deadline, however slow the
// guest's wasmsched_buffer; a cycle under the call deadline, where the same
// buffer is too slow.
func TestBufferUnderItsCallsDeadline(t *testing.T) {
	cfg := engine.Config{CallTimeout: time.Millisecond, InitTimeout: time.Minute}
	in := start(t, "slow_buffer", cfg)
	if code, err := in.Sync([]byte{0x0a, 0x00}); err != nil || code != abiv1.Code_CODE_SUCCESS {
		t.Fatalf("Sync = %v, %v; want its buffer made under the init deadline", code, err)
	}
	_, _, err := in.Cycle(nil)
	wantCallError(t, err, "slow_buffer", "cycle: buffer", engine.KindTimeout, "deadline of 1ms exceeded")
}

// The well-behaved guest works through every call, so a failure of the
// others comes from what they get wrong.
func TestGoodGuest(t *testing.T) {
	m := compile(t, "good", engine.Config{})
	if m.Name() != "good" || m.Version() != version(guest(t, "good")) {
		t.Fatalf("module is %s@%s", m.Name(), m.Version())
	}
	in, err := m.NewInstance(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	info, err := in.Init("good", []byte(`{"a": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	if info.Code != abiv1.Code_CODE_SUCCESS || info.AbiVersion != engine.ABIVersion || info.Points != 1<<abiv1.Point_POINT_FILTER {
		t.Fatalf("PolicyInfo = %v", info)
	}
	if code, err := in.Sync([]byte{0x0a, 0x00}); err != nil || code != abiv1.Code_CODE_SUCCESS {
		t.Fatalf("Sync = %v, %v", code, err)
	}
	if code, _, err := in.Cycle(nil); err != nil || code != abiv1.Code_CODE_SUCCESS {
		t.Fatalf("Cycle = %v, %v", code, err)
	}
	if code, _, err := in.Filter(2); err != nil || code != abiv1.Code_CODE_SUCCESS {
		t.Fatalf("Filter(2) = %v, %v", code, err)
	}
	if r, err := in.Result("filter"); err != nil || r.Code != abiv1.Code_CODE_INVALID || len(r.Reasons) != 0 {
		t.Fatalf("Result after Filter(2) = %v, %v; want an empty result", r, err)
	}
	if code, seq, err := in.Filter(3); err != nil || code != abiv1.Code_CODE_UNSCHEDULABLE || seq != 1 {
		t.Fatalf("Filter(3) = %v, seq %d, %v", code, seq, err)
	}
	if r, err := in.Result("filter"); err != nil || r.Code != abiv1.Code_CODE_UNSCHEDULABLE || !slices.Equal(r.Reasons, []string{"no"}) {
		t.Fatalf("Result after Filter(3) = %v, %v", r, err)
	}
	if score, code, err := in.Score(7); err != nil || code != abiv1.Code_CODE_SUCCESS || score != 7 {
		t.Fatalf("Score(7) = %d, %v, %v", score, code, err)
	}
	if code, err := in.Call(abiv1.Point_POINT_RESERVE, []byte{0x08, 0x01}); err != nil || code != abiv1.Code_CODE_SUCCESS {
		t.Fatalf("Call(reserve) = %v, %v", code, err)
	}
	if in.Broken() || m.Instances() != 1 {
		t.Fatalf("Broken = %v, Instances = %d", in.Broken(), m.Instances())
	}
	// Every call into an export is counted once, under the export's name.
	calls := map[string]int64{}
	for _, g := range m.GuestTime() {
		if g.Calls <= 0 || g.Time <= 0 {
			t.Errorf("GuestTime %s: %d calls, %v", g.Export, g.Calls, g.Time)
		}
		calls[g.Export] = g.Calls
	}
	want := map[string]int64{"abi_version": 1, "init": 1, "sync": 1, "cycle": 1, "filter": 2, "score": 1, "call": 1,
		"buffer": 4, // init, sync, cycle and call write a request
		"result": 3} // init's PolicyInfo and the two Results
	if !maps.Equal(calls, want) {
		t.Errorf("GuestTime calls = %v, want %v", calls, want)
	}
	in.Close(context.Background())
	if n := m.Instances(); n != 0 {
		t.Fatalf("Instances after Close = %d", n)
	}
}

// Compile refuses modules that cannot be policies, naming the policy, its
// version and what is wrong.
func TestCompileRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		bin  []byte // nil: testdata/<name>.wasm
		want string
	}{
		{"garbage", []byte("this is not WebAssembly"), "not a valid WebAssembly module: not a WebAssembly module (bad magic number)"},
		{"no_score", nil, "does not export wasmsched_score"},
		{"no_memory", nil, `does not export its memory as "memory"`},
		{"bad_signature", nil, "export wasmsched_filter has signature"}, // an older ABI's
		{"env_import", nil, "imports env.foo, which the sandbox does not provide"},
		{"memory_min", nil, "not a valid WebAssembly module: section memory: min 256 pages (16 Mi) over limit of 112 pages (7 Mi)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := tc.bin
			if bin == nil {
				bin = guest(t, tc.name)
			}
			m, err := engine.Compile(context.Background(), bin, engine.Config{Name: tc.name, MemoryLimit: engine.MinMemoryLimit})
			if err == nil {
				_ = m.Close(context.Background())
				t.Fatalf("Compile succeeded, want %q", tc.want)
			}
			prefix := "policy " + tc.name + "@" + version(bin) + ": "
			if msg := err.Error(); !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, tc.want) {
				t.Fatalf("error = %q\nwant      %q ... %q", msg, prefix, tc.want)
			}
			t.Log(err)
		})
	}
}

// Binaries that once took the whole host process down fail to compile
// with an error, and the process-wide compilation cache still works.
func TestCompileSurvivesHostileBinaries(t *testing.T) {
	header := []byte("\x00asm\x01\x00\x00\x00")
	// One function of type [] -> [] whose body is a typed select of
	// (ref null func), with the prefixed encoding 0x63 0x70.
	typedSelect := append(slices.Clone(header),
		1, 4, 1, 0x60, 0, 0, // type section
		3, 2, 1, 0, // function section
		10, 15, 1, 13, 0, 0xd0, 0x70, 0xd0, 0x70, 0x41, 0x01, 0x1c, 0x01, 0x63, 0x70, 0x1a, 0x0b)
	for _, tc := range []struct {
		name string
		bin  []byte
		want string
	}{
		// wazero allocates what a vector declares before reading it: 2^24
		// exports in 14 bytes (2^28 aborted the process out of memory).
		{"huge export count", append(slices.Clone(header), 7, 4, 0xff, 0xff, 0xff, 0x07),
			"not a valid WebAssembly module: section 7: vector of 16777215 entries cannot fit in the 0 bytes left"},
		// wazero's validator accepts it and its compiler panics.
		{"compiler panic", typedSelect,
			"not a valid WebAssembly module: wazero failed on it: runtime error: index out of range [-1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 { // a second time, in case the first left wazero's cache locked
				m, err := engine.Compile(context.Background(), tc.bin, engine.Config{Name: "hostile"})
				if err == nil {
					_ = m.Close(context.Background())
					t.Fatal("Compile succeeded")
				}
				if want := "policy hostile@" + version(tc.bin) + ": " + tc.want; err.Error() != want {
					t.Fatalf("error = %q\nwant      %q", err, want)
				}
			}
			compile(t, "good", engine.Config{})
		})
	}
}

// Guests that misbehave while starting or in a call fail with an error of
// the right kind, and the instance is left broken when its state can no
// longer be trusted.
func TestMisbehavingGuests(t *testing.T) {
	newInstance := func(t *testing.T, name string, cfg engine.Config) error {
		m := compile(t, name, cfg)
		in, err := m.NewInstance(context.Background())
		if err == nil {
			in.Close(context.Background())
		}
		if n := m.Instances(); n != 0 {
			t.Errorf("%d instances left after a failed start", n)
		}
		return err
	}
	initOnly := func(t *testing.T, name string, cfg engine.Config) error {
		m := compile(t, name, cfg)
		in, err := m.NewInstance(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close(context.Background())
		_, err = in.Init(name, []byte(`{}`))
		return err
	}
	// filterResult runs Filter(1), which must succeed, then fetches its
	// result and reports whether the instance broke.
	filterResult := func(t *testing.T, name string, cfg engine.Config) error {
		in := start(t, name, cfg)
		code, _, err := in.Filter(1)
		if err != nil {
			t.Fatalf("Filter: %v", err)
		}
		if code != abiv1.Code_CODE_UNSCHEDULABLE {
			t.Fatalf("Filter = %v", code)
		}
		_, err = in.Result("filter")
		if !in.Broken() {
			t.Errorf("instance not Broken after the bad result")
		}
		return err
	}
	filter := func(t *testing.T, name string, cfg engine.Config) error {
		_, _, err := start(t, name, cfg).Filter(1)
		return err
	}
	score := func(t *testing.T, name string, cfg engine.Config) error {
		_, _, err := start(t, name, cfg).Score(1)
		return err
	}

	for _, tc := range []struct {
		name string
		cfg  engine.Config
		run  func(*testing.T, string, engine.Config) error
		call string
		kind engine.Kind
		want string
	}{
		{"abi_v2", engine.Config{}, newInstance, "abi_version", engine.KindABI,
			"module speaks ABI version 2, this scheduler speaks ABI version 1"},
		{"init_loop", engine.Config{InitTimeout: 200 * time.Millisecond}, newInstance, "_initialize", engine.KindTimeout,
			"deadline of 200ms exceeded"},
		{"init_trap", engine.Config{}, newInstance, "_initialize", engine.KindTrap,
			"wasm error: unreachable"},
		{"init_abi2", engine.Config{}, initOnly, "init", engine.KindABI,
			"module declares ABI version 2, this scheduler speaks ABI version 1"},
		{"init_reject", engine.Config{}, initOnly, "init", engine.KindRejected,
			"bad settings"},
		{"buffer_outside", engine.Config{}, initOnly, "init", engine.KindInvalid,
			"wasmsched_buffer returned 0xfffff000, outside the module's memory for "},
		{"filter_zero", engine.Config{}, filter, "filter", engine.KindInvalid,
			"returned status code 0, which is not a valid code"},
		{"filter_99", engine.Config{}, filter, "filter", engine.KindInvalid,
			"returned status code 99, which is not a valid code"},
		{"score_zero", engine.Config{}, score, "score", engine.KindInvalid,
			"returned status code 0, which is not a valid code"},
		{"filter_trap", engine.Config{}, filter, "filter", engine.KindTrap,
			"wasm error: unreachable"},
		{"result_outside", engine.Config{}, filterResult, "filter", engine.KindInvalid,
			"result at 0xffff0000+16 lies outside the module's memory"},
		{"result_straddle", engine.Config{}, filterResult, "filter", engine.KindInvalid,
			"result at 0xfff8+16 lies outside the module's memory"},
		{"result_huge", engine.Config{}, filterResult, "filter", engine.KindInvalid,
			"result of 67108865 bytes exceeds the 67108864 byte limit"},
		{"result_garbage", engine.Config{}, filterResult, "filter", engine.KindInvalid,
			"undecodable Result: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			begin := time.Now()
			err := tc.run(t, tc.name, tc.cfg)
			wantCallError(t, err, tc.name, tc.call, tc.kind, tc.want)
			t.Logf("%v (after %v)", err, time.Since(begin).Round(time.Millisecond))
			if tc.kind == engine.KindTimeout && time.Since(begin) < tc.cfg.InitTimeout {
				t.Fatalf("timed out after %v, before the %v deadline", time.Since(begin), tc.cfg.InitTimeout)
			}
		})
	}
}

// A call that never returns is interrupted at its deadline; the instance is
// broken and refuses further calls, and the module and host carry on.
func TestRunawayCallTimesOut(t *testing.T) {
	const timeout = 50 * time.Millisecond
	m := compile(t, "filter_loop", engine.Config{CallTimeout: timeout})
	in, err := m.NewInstance(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close(context.Background())
	if _, err := in.Init("filter_loop", nil); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	_, _, err = in.Filter(0)
	elapsed := time.Since(begin)
	wantCallError(t, err, "filter_loop", "filter", engine.KindTimeout, "deadline of 50ms exceeded")
	if elapsed < timeout || elapsed > 5*time.Second {
		t.Fatalf("interrupted after %v, want just over %v", elapsed, timeout)
	}
	t.Logf("interrupted after %v", elapsed)
	if !in.Broken() {
		t.Fatal("instance not Broken after a timeout")
	}
	_, _, err = in.Filter(0)
	wantCallError(t, err, "filter_loop", "filter", engine.KindBroken, "instance already failed")
	_, _, err = in.Score(0)
	wantCallError(t, err, "filter_loop", "score", engine.KindBroken, "instance already failed")

	// A fresh instance of the same module starts and answers other calls.
	other, err := m.NewInstance(context.Background())
	if err != nil {
		t.Fatalf("NewInstance after a timeout: %v", err)
	}
	defer other.Close(context.Background())
	if _, err := other.Init("filter_loop", nil); err != nil {
		t.Fatal(err)
	}
	if score, _, err := other.Score(9); err != nil || score != 9 {
		t.Fatalf("Score on a fresh instance = %d, %v", score, err)
	}
}

// memory.grow past the memory limit fails inside the guest (it returns -1,
// as the guest sees) without a trap; the instance and the host carry on.
func TestMemoryGrowStopsAtLimit(t *testing.T) {
	for _, tc := range []struct {
		guest string
		limit uint64
	}{
		{"grow", engine.MinMemoryLimit},
		{"grow", 16 << 20},
		{"grow_max", engine.MinMemoryLimit}, // declares a 4 GiB maximum
	} {
		// Linear memory gets the memory limit less the stack's and the
		// tables' sixteenths.
		limit := tc.limit - 2*tc.limit/16
		pages := int64(limit / 65536)
		// Growing a page at a time copies memory: give it time under -race.
		in := start(t, tc.guest, engine.Config{MemoryLimit: tc.limit, CallTimeout: 10 * time.Second})
		grown, code, err := in.Score(0)
		if err != nil || code != abiv1.Code_CODE_SUCCESS {
			t.Fatalf("%s, limit %d: Score(0) = %v, %v", tc.guest, limit, code, err)
		}
		// The guest starts with one page and stops when memory.grow returns -1.
		if grown != pages-1 {
			t.Fatalf("%s, limit %d: grew %d pages before memory.grow returned -1, want %d", tc.guest, limit, grown, pages-1)
		}
		if got := uint64(in.MemoryBytes()); got != limit {
			t.Fatalf("%s, limit %d: memory is %d bytes", tc.guest, limit, got)
		}
		if v, _, err := in.Score(1); err != nil || v != -1 {
			t.Fatalf("%s, limit %d: memory.grow(65536) returned %d (%v), want -1", tc.guest, limit, v, err)
		}
		if in.Broken() {
			t.Fatalf("%s, limit %d: instance Broken after a refused memory.grow", tc.guest, limit)
		}
		if code, _, err := in.Filter(0); err != nil || code != abiv1.Code_CODE_SUCCESS {
			t.Fatalf("%s, limit %d: Filter after growing = %v, %v", tc.guest, limit, code, err)
		}
	}
}

// The sandbox offers WASI with no environment, no arguments, no
// preopened directories (so no files) and no sockets.
func TestSandboxHasNoFilesEnvOrSockets(t *testing.T) {
	// WASI errno values (wasi_snapshot_preview1).
	const (
		success = 0
		ebadf   = 8
		eperm   = 63
	)
	in := start(t, "wasi", engine.Config{})
	for _, tc := range []struct {
		handle int32
		what   string
		want   int64
	}{
		{0, "environ_sizes_get errno", success},
		{1, "environment variables", 0},
		{2, "args_sizes_get errno", success},
		{3, "arguments", 0},
		{4, "fd_prestat_get(3) errno (no preopened directory)", ebadf},
		{5, "path_open(3, etc/passwd) errno", ebadf},
		{7, "sock_accept(3) errno", ebadf},
		{8, "path_open(3, /etc/passwd) errno (absolute paths are refused first)", eperm},
	} {
		got, code, err := in.Score(tc.handle)
		if err != nil || code != abiv1.Code_CODE_SUCCESS {
			t.Fatalf("Score(%d) = %v, %v", tc.handle, code, err)
		}
		if got != tc.want {
			t.Errorf("%s = %d, want %d", tc.what, got, tc.want)
		}
	}
	// stdin is not a directory: opening a path under it fails too.
	if got, _, err := in.Score(6); err != nil || got == success {
		t.Errorf("path_open(0, etc/passwd) errno = %d (%v), want a failure", got, err)
	} else {
		t.Logf("path_open(0, etc/passwd) errno = %d", got)
	}
}

// Calls on a closed module's instances, and new instances, fail as closed.
func TestClosedModule(t *testing.T) {
	m := compile(t, "good", engine.Config{})
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := m.NewInstance(context.Background())
	wantCallError(t, err, "good", "instantiate", engine.KindClosed, "module is closed")
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  engine.Config
		want []string // nil: valid
	}{
		{"zero value", engine.Config{}, nil},
		{"smallest", engine.Config{MemoryLimit: engine.MinMemoryLimit, CallTimeout: time.Millisecond, InitTimeout: time.Millisecond}, nil},
		{"memory limit below the minimum", engine.Config{MemoryLimit: engine.MinMemoryLimit - 1},
			[]string{"memory limit 8388607 bytes is below the minimum of 8388608 (8 MiB)"}},
		{"memory limit over 4 GiB", engine.Config{MemoryLimit: 4<<30 + 1},
			[]string{"memory limit 4294967297 bytes exceeds the 4 GiB a 32-bit module can address"}},
		{"call timeout below 1ms", engine.Config{CallTimeout: 999 * time.Microsecond},
			[]string{"call timeout 999µs is below 1ms"}},
		{"negative call timeout", engine.Config{CallTimeout: -time.Second},
			[]string{"call timeout -1s is below 1ms"}},
		{"init timeout below 1ms", engine.Config{InitTimeout: time.Microsecond},
			[]string{"init timeout 1µs is below 1ms"}},
		{"several", engine.Config{MemoryLimit: 1 << 20, CallTimeout: time.Nanosecond},
			[]string{"memory limit 1048576 bytes is below the minimum", "call timeout 1ns is below 1ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate = nil, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %q, want it to say %q", err, w)
				}
			}
			if n := len(strings.Split(err.Error(), "\n")); n != len(tc.want) {
				t.Errorf("Validate reports %d problems, want %d: %q", n, len(tc.want), err)
			}
		})
	}

	// Compile validates first and names the policy.
	cfg := engine.Config{Name: "good", MemoryLimit: 1 << 20}
	_, err := engine.Compile(context.Background(), guest(t, "good"), cfg)
	if err == nil || err.Error() != "policy good: memory limit 1048576 bytes is below the minimum of 8388608 (8 MiB)" {
		t.Fatalf("Compile with a bad config: %v", err)
	}
}

// The .wasm guests are what wat2wasm makes of the .wat sources (see
// testdata/README.md). Skipped where wat2wasm is not installed.
func TestGuestsUpToDate(t *testing.T) {
	wat2wasm, err := exec.LookPath("wat2wasm")
	if err != nil {
		t.Skip("wat2wasm not installed")
	}
	sources, _ := filepath.Glob(filepath.Join("testdata", "*.wat"))
	tmp := filepath.Join(t.TempDir(), "out.wasm")
	for _, src := range sources {
		args := []string{src, "-o", tmp}
		if b, err := os.ReadFile(src); err == nil {
			// A first line ";; flags: ..." adds wat2wasm flags.
			if first, _, _ := strings.Cut(string(b), "\n"); strings.HasPrefix(first, ";; flags: ") {
				args = append(strings.Fields(strings.TrimPrefix(first, ";; flags: ")), args...)
			}
		}
		if out, err := exec.Command(wat2wasm, args...).CombinedOutput(); err != nil {
			t.Errorf("wat2wasm %s: %v\n%s", src, err, out)
			continue
		}
		want, err := os.ReadFile(tmp)
		if err != nil {
			t.Fatal(err)
		}
		compiled := strings.TrimSuffix(src, ".wat") + ".wasm"
		if have, err := os.ReadFile(compiled); err != nil || !bytes.Equal(have, want) {
			t.Errorf("%s is stale or missing: regenerate it (testdata/README.md)", compiled)
		}
	}
}
