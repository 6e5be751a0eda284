package engine_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/engine"
)

// A linear memory lives in address space reserved up to its limit: growing
// it to the limit moves and copies nothing; closing the instance gives its
// pages back at once, and a read that comes late (a host function of a
// call that outlived a Close) finds zeros rather than crashing the
// process; the range is unmapped once the instance is gone.
func TestLinearMemoryReserved(t *testing.T) {
	const limit = 16 << 20
	linear := int64(limit - 2*limit/16) // less the stack's and the tables' budgets
	ctx := context.Background()
	m := compile(t, "grow", engine.Config{MemoryLimit: limit, CallTimeout: 10 * time.Second})
	before := engine.ReservedBytes()
	in, err := m.NewInstance(ctx)
	if err != nil {
		t.Fatalf("NewInstance: %v", err)
	}
	if _, err := in.Init("grow", nil); err != nil {
		t.Fatalf("Init: %v", err)
	}
	mapped := engine.Mapped(in)
	if mapped == nil || !mapped() {
		t.Fatal("the linear memory is not a reserved range")
	}
	if got := engine.ReservedBytes() - before; got < linear {
		t.Fatalf("reserved %d bytes for the instance, want its linear memory's limit, %d", got, linear)
	}
	if in.MemoryBytes() != 65536 {
		t.Fatalf("memory is %d bytes before growing, want the one page the guest declares", in.MemoryBytes())
	}

	base := engine.MemoryBase(in)
	const mark = 100 // below the guest's buffer (1024), away from its data (16..22)
	if !engine.SetMemoryByte(in, mark, 7) {
		t.Fatal("cannot write the guest's memory")
	}
	grown, code, err := in.Score(0) // one page at a time, to the limit
	if err != nil || code != abiv1.Code_CODE_SUCCESS || grown != linear/65536-1 {
		t.Fatalf("Score(0) = %d, %v, %v; want %d pages grown", grown, code, err, linear/65536-1)
	}
	if got := engine.MemoryBase(in); got != base {
		t.Fatalf("growing moved the memory from %#x to %#x", base, got)
	}
	if b, _ := engine.MemoryByte(in, mark); b != 7 {
		t.Fatalf("byte %d is %d after growing, want 7", mark, b)
	}
	if b, ok := engine.MemoryByte(in, uint32(linear-1)); !ok || b != 0 {
		t.Fatalf("last byte of the grown memory = %d (%v), want 0", b, ok)
	}

	in.Close(ctx)
	if b, ok := engine.MemoryByte(in, mark); !ok || b != 0 {
		t.Fatalf("byte %d after Close = %d (%v), want 0: the pages were not given back", mark, b, ok)
	}
	if !mapped() {
		t.Fatal("the range was unmapped while the instance was still reachable")
	}
	in = nil
	// The range goes when the instance does: wait for the collector.
	deadline := time.Now().Add(2 * time.Minute)
	for mapped() {
		if time.Now().After(deadline) {
			t.Fatal("the range of a closed, unreachable instance was never unmapped")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
