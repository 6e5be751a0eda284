package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// tick is the watchdog's resolution: a call is interrupted between its
// deadline and one tick later.
const tick = 2 * time.Millisecond

// watchdog interrupts calls that overrun their deadline. One goroutine
// serves every instance of every module; a call only stores its deadline
// (in ticks) and clears it afterwards, so the watchdog costs calls nothing
// beyond two atomic stores.
type watchdog struct {
	ticks atomic.Int64

	mu        sync.Mutex
	instances map[*Instance]struct{}
	started   bool
}

var watch = &watchdog{instances: map[*Instance]struct{}{}}

func ticksFor(d time.Duration) int64 { return int64((d+tick-1)/tick) + 1 }

func (w *watchdog) now() int64 { return w.ticks.Load() }

func (w *watchdog) add(in *Instance) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.instances[in] = struct{}{}
	if !w.started {
		w.started = true
		go w.run()
	}
}

func (w *watchdog) remove(in *Instance) {
	w.mu.Lock()
	delete(w.instances, in)
	w.mu.Unlock()
}

func (w *watchdog) run() {
	t := time.NewTicker(tick)
	defer t.Stop()
	for range t.C {
		now := w.ticks.Add(1)
		w.mu.Lock()
		for in := range w.instances {
			if d := in.deadline.Load(); d != 0 && now >= d && !in.expired.Load() {
				in.expired.Store(true)
				in.flag.Set(1)
			}
		}
		idle := len(w.instances) == 0
		if idle {
			w.started = false
		}
		w.mu.Unlock()
		if idle {
			return
		}
	}
}
