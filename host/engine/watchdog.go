package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// tick is the clock's resolution: a call is stopped between its deadline
// and one tick (plus interrupt.Budget guest steps) later.
const tick = 2 * time.Millisecond

// watchdog is a coarse clock for deadlines. A call reads the monotonic
// clock once to store its deadline in ticks, and clears it afterwards; the
// yield host function compares it with a tick counter that a goroutine
// keeps up to date while any instance exists (an atomic load, no clock
// read, on the guest's hot path). The counter is derived from the clock,
// not counted: a ticker drops ticks while its goroutine waits for a CPU
// (guests busy on every core), and counting them would stretch deadlines
// by as much (the hostile guest suite saw a 200ms deadline let a 2s sleep
// finish that way). A counter that lags makes a deadline late by the lag,
// never early. The goroutine needs no CPU while a call runs: if every P is
// busy in guest code, the yield calls let the runtime preempt them.
type watchdog struct {
	ticks atomic.Int64

	mu      sync.Mutex
	users   int
	running bool
}

var watch = &watchdog{}

func ticksFor(d time.Duration) int64 { return int64((d+tick-1)/tick) + 1 }

// epoch is the origin of the tick clock.
var epoch = time.Now()

// clock is the current tick, read from the clock; ticks start at 1 so that
// a deadline is never 0 (0 means no call in progress).
func clock() int64 { return 1 + int64(time.Since(epoch)/tick) }

// now is the tick as the watchdog last stored it: at most a tick behind
// the clock while the watchdog gets CPU, further behind when it does not.
func (w *watchdog) now() int64 { return w.ticks.Load() }

// deadline is the tick at which a call that starts now and may run for d
// expires.
func deadline(d time.Duration) int64 { return clock() + ticksFor(d) }

// add registers a user (an instance) and starts the clock if needed.
func (w *watchdog) add() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.users++
	if !w.running {
		w.running = true
		go w.run()
	}
}

// remove unregisters a user; the clock stops with the last one.
func (w *watchdog) remove() {
	w.mu.Lock()
	w.users--
	w.mu.Unlock()
}

func (w *watchdog) run() {
	t := time.NewTicker(tick)
	defer t.Stop()
	w.ticks.Store(clock())
	for range t.C {
		w.ticks.Store(clock())
		w.mu.Lock()
		idle := w.users <= 0
		if idle {
			w.running = false
		}
		w.mu.Unlock()
		if idle {
			return
		}
	}
}
