package engine

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmsched/wasmsched/host/interrupt"
)

// Every function the host gives a guest bounds its own work and checks the
// call's deadline: a guest cannot escape its deadline inside the host. The
// checks are where the work grows with what the guest passes: the stdio
// writers (fd_write with a million iovecs of 64 MiB each once ran for
// minutes inside the stderr capture, which copied every buffer whole),
// random_get (one call can ask for the whole memory), poll_oneoff (one call
// can carry millions of subscriptions) and wasmsched.log. The other WASI
// functions do constant work here: the sandbox has no arguments,
// environment, files or sockets, so they fail at once.

// errOverdue aborts a host function whose call is past its deadline: wazero
// turns the panic into the call's error, which invoke reports as a timeout.
var errOverdue = errors.New("deadline exceeded in a host function")

// hostChunk is how much work a host function does between two deadline
// checks.
const hostChunk = 64 << 10

// instanceOf finds the calling instance in a host function's context.
func instanceOf(ctx context.Context) *Instance {
	in, _ := ctx.Value(instanceKey{}).(*Instance)
	return in
}

// overdue reports whether the call in progress has passed its deadline, and
// marks it expired if so.
func (in *Instance) overdue() bool {
	if d := in.deadline.Load(); d != 0 && now() >= d {
		in.expired.Store(true)
		return true
	}
	return false
}

// stopIfOverdue ends the guest's call from inside a host function once it
// is past its deadline.
func (in *Instance) stopIfOverdue() {
	if in != nil && in.overdue() {
		panic(errOverdue)
	}
}

// yield is the host side of the instrumentation (package interrupt): the
// guest calls it every interrupt.Budget units of work, and when its call
// stack would overflow. Being Go code, it is where the runtime can preempt a
// long call; it answers 1 (trap) once the call has overrun its deadline.
func yield(ctx context.Context, _ api.Module, stack []uint64) {
	why := uint32(stack[0])
	stack[0] = 0
	in := instanceOf(ctx)
	if in == nil {
		return
	}
	if why == interrupt.YieldStackOverflow {
		in.overflow.Store(true)
		stack[0] = 1
		return
	}
	if in.overdue() {
		stack[0] = 1
	}
}

// maxLogPerCall bounds what one call may log: the lines go to the
// scheduler's own log, synchronously.
const maxLogPerCall = 64 << 10

// guestLog is wasmsched.log (level, ptr, size): a line for Config.Log, cut
// at maxLogLine bytes; past maxLogPerCall bytes in one call, lines are
// dropped and counted.
func (m *Module) guestLog(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceOf(ctx)
	in.stopIfOverdue()
	if m.cfg.Log == nil || in == nil {
		return
	}
	level, ptr, size := int32(stack[0]), uint32(stack[1]), uint32(stack[2])
	size = min(size, maxLogLine)
	if in.logged+int(size) > maxLogPerCall {
		in.logDropped++
		return
	}
	if b, ok := mod.Memory().Read(ptr, size); ok {
		in.logged += int(size)
		m.cfg.Log(level, string(b))
	}
}

// exportWASI instantiates wasi_snapshot_preview1 with the functions whose
// work a guest controls replaced by bounded ones.
func exportWASI(ctx context.Context, r wazero.Runtime) error {
	b := r.NewHostModuleBuilder(wasi_snapshot_preview1.ModuleName)
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	i32 := api.ValueTypeI32
	b.NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(randomGet), []api.ValueType{i32, i32}, []api.ValueType{i32}).
		WithParameterNames("buf", "buf_len").Export("random_get")
	b.NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(pollOneoff), []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}).
		WithParameterNames("in", "out", "nsubscriptions", "result.nevents").Export("poll_oneoff")
	_, err := b.Instantiate(ctx)
	return err
}

// WASI errno values the replacements answer.
const (
	errnoSuccess = 0
	errnoBadf    = 8
	errnoFault   = 21
	errnoInval   = 28
	errnoIO      = 29
)

// randomGet fills the buffer from crypto/rand a chunk at a time, checking
// the deadline between chunks.
func randomGet(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceOf(ctx)
	buf, n := uint32(stack[0]), uint32(stack[1])
	b, ok := mod.Memory().Read(buf, n)
	if !ok {
		stack[0] = errnoFault
		return
	}
	for len(b) > 0 {
		in.stopIfOverdue()
		k := min(len(b), hostChunk)
		if _, err := io.ReadFull(rand.Reader, b[:k]); err != nil {
			stack[0] = errnoIO
			return
		}
		b = b[k:]
	}
	stack[0] = errnoSuccess
}

// pollOneoff answers every subscription at once, checking the deadline
// every thousand: clocks expire at once (sleeping is a no-op in the
// sandbox, so a sleeping guest spins on the clock and meets its deadline),
// stdin, stdout and stderr are ready, other descriptors do not exist.
func pollOneoff(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceOf(ctx)
	inPtr, outPtr, nsubs, resultPtr := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	mem := mod.Memory()
	if nsubs == 0 {
		stack[0] = errnoInval
		return
	}
	if uint64(nsubs)*48 > uint64(mem.Size()) {
		stack[0] = errnoFault
		return
	}
	subs, ok1 := mem.Read(inPtr, nsubs*48)
	events, ok2 := mem.Read(outPtr, nsubs*32)
	if !ok1 || !ok2 {
		stack[0] = errnoFault
		return
	}
	for i := uint32(0); i < nsubs; i++ {
		if i%1024 == 0 {
			in.stopIfOverdue()
		}
		sub, ev := subs[i*48:], events[i*32:i*32+32]
		clear(ev)
		copy(ev[0:8], sub[0:8]) // userdata
		kind := sub[8]
		ev[10] = kind
		switch kind {
		case 0: // clock
		case 1, 2: // fd_read, fd_write
			if fd := binary.LittleEndian.Uint32(sub[16:]); fd > 2 {
				binary.LittleEndian.PutUint16(ev[8:], errnoBadf)
			}
		default:
			stack[0] = errnoInval
			return
		}
	}
	if !mem.WriteUint32Le(resultPtr, nsubs) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}

// tail is a guest's stdout or stderr: it keeps the last bytes written, to
// explain a trap (a Go guest prints its panic message to stderr before it
// aborts), copies at most that much of any write, and refuses writes once
// the call is past its deadline (fd_write then stops at once, whatever
// number of buffers it was given).
type tail struct {
	in   *Instance
	keep bool // false: stdout, kept nowhere

	mu  sync.Mutex
	buf []byte
}

const tailSize = 8192

func (t *tail) Write(p []byte) (int, error) {
	if t.in.overdue() {
		return 0, errOverdue
	}
	if !t.keep {
		return len(p), nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) >= tailSize {
		t.buf = append(t.buf[:0], p[len(p)-tailSize:]...)
		return len(p), nil
	}
	if len(t.buf)+len(p) > tailSize {
		drop := len(t.buf) + len(p) - tailSize
		t.buf = append(t.buf[:0], t.buf[drop:]...)
	}
	t.buf = append(t.buf, p...)
	return len(p), nil
}

// summary picks the line that explains a crash from what was kept: the
// last "panic:" or "fatal error:" line (Go and TinyGo print one before they
// abort), else the last line.
func (t *tail) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	best := ""
	for _, l := range lines {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "panic:"), strings.HasPrefix(l, "fatal error:"):
			best = l
		case strings.HasPrefix(l, "runtime: out of memory"), strings.Contains(l, "out of memory") && best == "":
			best = l
		case strings.HasPrefix(l, "runtime: goroutine stack exceeds"), strings.Contains(l, "stack overflow") && best == "":
			best = l
		}
	}
	if best == "" && len(lines) > 0 {
		best = strings.TrimSpace(lines[len(lines)-1])
	}
	if len(best) > 300 {
		best = best[:300] + "..."
	}
	return best
}
