package engine

import (
	"strings"
	"sync/atomic"
	"time"
)

// export names one function the host calls in a module.
type export int

const (
	exportInitialize export = iota
	exportABIVersion
	exportBuffer
	exportResult
	exportInit
	exportSync
	exportCycle
	exportFilter
	exportScore
	exportScoreNodes
	exportScoreNodesRaw
	exportNormalizeScores
	exportCall
	numExports
)

var exportNames = [numExports]string{
	exportInitialize: "_initialize",
	exportABIVersion: "wasmsched_abi_version",
	exportBuffer:     "wasmsched_buffer",
	exportResult:     "wasmsched_result",
	exportInit:       "wasmsched_init",
	exportSync:       "wasmsched_sync",
	exportCycle:      "wasmsched_cycle",
	exportFilter:     "wasmsched_filter",
	exportScore:      "wasmsched_score",
	exportScoreNodes: "wasmsched_score_nodes",
	// exportScoreNodesRaw is wasmsched_score_nodes without NormalizeScore.
	exportScoreNodesRaw: "wasmsched_score_nodes_raw",
	// exportNormalizeScores is NormalizeScore without messages.
	exportNormalizeScores: "wasmsched_normalize_scores",
	exportCall:            "wasmsched_call",
}

// guestTime counts the calls into one export, the time spent in them and
// the longest call.
type guestTime struct{ calls, nanos, max atomic.Int64 }

func (g *guestTime) add(d time.Duration) {
	g.calls.Add(1)
	g.nanos.Add(int64(d))
	for {
		m := g.max.Load()
		if int64(d) <= m || g.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// ExportTime is the time a module version spent in one of its exports,
// over all its instances, since it was compiled.
type ExportTime struct {
	// Export is the export's name without the "wasmsched_" prefix:
	// "sync", "cycle", "filter", "score", "score_nodes",
	// "score_nodes_raw", "normalize_scores", "call", "buffer", "result",
	// "init", "abi_version", "_initialize".
	Export string
	Calls  int64
	Time   time.Duration
	// Max is the longest single call: the figure to hold against the
	// call deadline (a collection in the guest shows here first).
	Max time.Duration
}

// GuestTime returns the calls into each export that was called and the
// wall time they took, guest code and the host functions it called
// (WASI, yield) included. The time is measured around each call, so it
// includes the time the goroutine was descheduled by a busy machine.
func (m *Module) GuestTime() []ExportTime {
	var out []ExportTime
	for x := range numExports {
		g := &m.guest[x]
		if n := g.calls.Load(); n > 0 {
			out = append(out, ExportTime{Export: strings.TrimPrefix(exportNames[x], "wasmsched_"), Calls: n, Time: time.Duration(g.nanos.Load()), Max: time.Duration(g.max.Load())})
		}
	}
	return out
}
