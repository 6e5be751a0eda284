package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// A module that takes too long or too much memory to compile is refused,
// naming the limit, within about that limit, and the scheduler process
// never compiles it; a compile whose context ends (a newer upload) stops at
// once.
func TestCompileBounded(t *testing.T) {
	bin := testwasm.CostlyModule(100_000)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cfg  engine.Config
		want string
	}{
		{"time", engine.Config{CompileTimeout: 300 * time.Millisecond}, "compiling took longer than 300ms, the limit: a module this costly to compile is refused"},
		{"memory", engine.Config{CompileMemory: 64 << 20}, "compiling needed more than 64 MiB of memory, the limit: a module this costly to compile is refused"},
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
	_, err := engine.Compile(ctx, testwasm.CostlyModule(1000), engine.Config{Name: "costly"})
	if err == nil || !strings.Contains(err.Error(), "does not export wasmsched_abi_version") {
		t.Fatalf("Compile with the default limits = %v, want it compiled and refused for its exports", err)
	}
}
