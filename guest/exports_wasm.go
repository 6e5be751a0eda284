//go:build wasip1

package guest

import (
	"runtime"
	"unsafe"
)

// calls counts export calls; every yieldEvery calls the instance yields to
// the Go scheduler so the garbage collector's background work can run (a
// reactor that never yields stops collecting and grows without bound).
var calls uint32

const yieldEvery = 32

func enter() {
	calls++
	if calls%yieldEvery == 0 {
		runtime.Gosched()
	}
}

//go:wasmimport wasmsched log
func hostLogImport(level uint32, ptr unsafe.Pointer, size uint32)

func hostLog(level uint32, msg string) {
	hostLogImport(level, unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}

//go:wasmexport wasmsched_abi_version
func exportABIVersion() uint32 { return ABIVersion }

//go:wasmexport wasmsched_buffer
func exportBuffer(n uint32) unsafe.Pointer {
	b := inst.buffer(n)
	if n == 0 {
		b = inst.buffer(1)
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

//go:wasmexport wasmsched_result
func exportResult() uint64 {
	b := inst.marshalResult()
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))<<32 | uint64(len(b))
}

//go:wasmexport wasmsched_init
func exportInit(n uint32) uint32 {
	enter()
	return inst.init(n)
}

//go:wasmexport wasmsched_sync
func exportSync(n uint32) uint32 {
	enter()
	if !inst.ready {
		return inst.fail(Error, "wasmsched_sync before a successful wasmsched_init")
	}
	return inst.sync(n)
}

//go:wasmexport wasmsched_cycle
func exportCycle(n uint32) uint32 {
	enter()
	if !inst.ready {
		return inst.fail(Error, "wasmsched_cycle before a successful wasmsched_init")
	}
	return inst.startCycle(n)
}

//go:wasmexport wasmsched_filter
func exportFilter(h uint32) uint64 {
	enter()
	return inst.filter(h)
}

//go:wasmexport wasmsched_score
func exportScore(h uint32) uint64 {
	enter()
	return inst.score(h)
}

//go:wasmexport wasmsched_score_nodes
func exportScoreNodes(n uint32) uint64 {
	enter()
	return scoreNodesResult(n, true)
}

//go:wasmexport wasmsched_score_nodes_raw
func exportScoreNodesRaw(n uint32) uint64 {
	enter()
	return scoreNodesResult(n, false)
}

//go:wasmexport wasmsched_normalize_scores
func exportNormalizeScores(n uint32) uint64 {
	enter()
	code, i := inst.normalizeScores(n)
	return scoresResult(n, code, i)
}

func scoreNodesResult(n uint32, normalize bool) uint64 {
	code, i := inst.scoreNodes(n, normalize)
	return scoresResult(n, code, i)
}

// scoresResult is the answer of the exports that leave n scores in
// inst.scores: code << 32 | their address on success, code << 32 | the
// index of the failure otherwise.
func scoresResult(n uint32, code Code, i uint32) uint64 {
	if code == Success {
		if n == 0 {
			return uint64(Success) << 32
		}
		i = uint32(uintptr(unsafe.Pointer(unsafe.SliceData(inst.scores))))
	}
	return uint64(code)<<32 | uint64(i)
}

//go:wasmexport wasmsched_call
func exportCall(point, n uint32) uint32 {
	enter()
	return inst.call(point, n)
}
