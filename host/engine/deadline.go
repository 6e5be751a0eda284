package engine

import "time"

// Deadlines are compared with the monotonic clock at every check: in the
// yield host function (called every interrupt.Budget units of guest work,
// so one clock read, about 25 ns, per tens of microseconds of guest work)
// and in every host function. An earlier version compared them with a tick
// counter that a goroutine kept up to date, to spare the clock read; on a
// loaded machine that goroutine waited for a CPU and deadlines came late
// by its lag (a 200ms deadline stopped calls after 650ms in a -race
// scheduler on two busy cores).

// epoch is the origin of deadlines.
var epoch = time.Now()

// now is the time since epoch in nanoseconds, at least 1: a deadline is
// never 0, which means no call in progress.
func now() int64 { return 1 + int64(time.Since(epoch)) }

// deadline is the time at which a call that starts now and may run for d
// expires.
func deadline(d time.Duration) int64 { return now() + int64(d) }
