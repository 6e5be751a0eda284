package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// tick is the clock's resolution: a call is stopped between its deadline
// and one tick (plus interrupt.Budget guest steps) later.
const tick = 2 * time.Millisecond

// watchdog is a coarse clock for deadlines: a goroutine advances a tick
// counter while any instance exists. A call stores its deadline in ticks
// and clears it afterwards (two atomic stores, no clock read); the yield
// host function compares. The goroutine needs no CPU while a call runs:
// if every P is busy in guest code, the yield calls let the runtime
// preempt them.
type watchdog struct {
	ticks atomic.Int64

	mu      sync.Mutex
	users   int
	running bool
}

var watch = &watchdog{}

func ticksFor(d time.Duration) int64 { return int64((d+tick-1)/tick) + 1 }

func (w *watchdog) now() int64 { return w.ticks.Load() }

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
	// The clock is read, not counted: a ticker drops ticks while its
	// goroutine waits for a CPU (guests busy on every core), and counting
	// them would stretch every deadline by as much. The hostile guest suite
	// saw a 200ms deadline let a 2s sleep finish that way.
	base, start := w.ticks.Load(), time.Now()
	for range t.C {
		w.ticks.Store(base + 1 + int64(time.Since(start)/tick))
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
