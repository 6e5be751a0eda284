package policy

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// Load reports its stages in order, and a load whose context is cancelled,
// before it starts or at any stage, returns an error wrapping the
// cancellation instead of a policy (with engine.Compile ignoring
// cancellation or honouring it).
func TestLoadStagesAndCancellation(t *testing.T) {
	wasm := testwasm.Bytes(t, "test/guests/probe")
	for _, tc := range []struct {
		name     string
		cancelAt string // "": never; "before": before Load
		want     []string
	}{
		{"not cancelled", "", []string{StageCompiling, StageInitialising}},
		{"cancelled before", "before", nil},
		{"cancelled while compiling", StageCompiling, []string{StageCompiling}},
		{"cancelled while initialising", StageInitialising, []string{StageCompiling, StageInitialising}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelAt == "before" {
				cancel()
			}
			var stages []string
			p, err := Load(ctx, Options{Name: "probe", Wasm: wasm, MaxInstances: 1, Engine: engine.Config{CallTimeout: testCallTimeout}, Stage: func(s string) {
				stages = append(stages, s)
				if s == tc.cancelAt {
					cancel()
				}
			}})
			if !slices.Equal(stages, tc.want) {
				t.Errorf("stages %v, want %v", stages, tc.want)
			}
			if tc.cancelAt == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				_ = p.Close(context.Background())
				return
			}
			if p != nil || !errors.Is(err, context.Canceled) {
				t.Fatalf("Load = %v, %v; want no policy and an error wrapping context.Canceled", p, err)
			}
		})
	}
}
