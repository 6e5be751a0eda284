package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/host/engine"
)

func uleb(b []byte, v uint32) []byte {
	for ; v >= 0x80; v >>= 7 {
		b = append(b, byte(v)|0x80)
	}
	return append(b, byte(v))
}

func wasmSection(id byte, body []byte) []byte {
	return append(uleb([]byte{id}, uint32(len(body))), body...)
}

// costlyModule has n functions (each a block and a br_table) and nothing
// else: within the structural limits, and a few seconds and a few hundred
// MB to compile at n = 100000. The same digest always, so that a test does
// not compile it twice in the cache.
func costlyModule(n int) []byte {
	bin := []byte("\x00asm\x01\x00\x00\x00")
	bin = append(bin, wasmSection(1, []byte{1, 0x60, 0, 0})...)
	fs := uleb(nil, uint32(n))
	body := []byte{0, 0x02, 0x40, 0x41, 0x00, 0x0e, 0x01, 0x00, 0x00, 0x0b, 0x0b}
	code := uleb(nil, uint32(n))
	for range n {
		fs = append(fs, 0)
		code = append(uleb(code, uint32(len(body))), body...)
	}
	bin = append(bin, wasmSection(3, fs)...)
	return append(bin, wasmSection(10, code)...)
}

// A module that takes too long or too much memory to compile is refused,
// naming the limit, within about that limit, and the scheduler process
// never compiles it; a compile whose context ends (a newer upload) stops at
// once.
func TestCompileBounded(t *testing.T) {
	bin := costlyModule(100_000)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cfg  engine.Config
		want string
	}{
		{"time", engine.Config{CompileTimeout: 300 * time.Millisecond}, "compiling took longer than 300ms, the limit: a module this costly to compile is refused"},
		{"memory", engine.Config{CompileMemory: 100 << 20}, "compiling needed more than 100 MiB of memory, the limit: a module this costly to compile is refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Name = "costly"
			start := time.Now()
			_, err := engine.Compile(ctx, bin, tc.cfg)
			took := time.Since(start)
			t.Logf("refused after %v: %v", took, err)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "policy costly@"+version(bin)+": not a valid WebAssembly module: ") {
				t.Fatalf("Compile = %v, want an error naming the policy and %q", err, tc.want)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err := engine.Compile(ctx, bin, engine.Config{Name: "costly", CompileTimeout: time.Minute})
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "compile abandoned after") {
			t.Fatalf("Compile = %v, want it abandoned with context.Canceled", err)
		}
	})
	// Within the limits, the same module compiles (it then lacks the ABI's
	// exports, which only a compiled module can tell).
	_, err := engine.Compile(ctx, costlyModule(1000), engine.Config{Name: "costly"})
	if err == nil || !strings.Contains(err.Error(), "does not export wasmsched_abi_version") {
		t.Fatalf("Compile with the default limits = %v, want it compiled and refused for its exports", err)
	}
}
