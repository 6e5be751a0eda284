package main

import (
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/host/lifecycle"
)

// The table shows what each policy loads now, and for how long.
func TestStatusTableLoading(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	active := strings.Repeat("a", 64)
	slow := "3f2a1c9e0b7d" + strings.Repeat("0", 52)
	reports := []lifecycle.Status{{Replica: "sched-0", Profile: "default", Policies: []lifecycle.SlotStatus{
		{Policy: "gpu", Mode: lifecycle.ModeEnforce, Digest: active, Active: true, LoadedAt: now.Add(-time.Hour), Reloads: 2,
			Loading: &lifecycle.Pending{Digest: slow, Since: now.Add(-12*time.Second - 300*time.Millisecond), Stage: "compiling"}},
		{Policy: "zone", Mode: lifecycle.ModeEnforce, Digest: active, Active: true, LoadedAt: now.Add(-time.Hour)},
	}}}
	var out strings.Builder
	if err := printStatus(&out, reports, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "LOADING") {
		t.Fatalf("table:\n%s", out.String())
	}
	if !strings.Contains(lines[1], "compiling 3f2a1c9e0b7d for 12s") || !strings.Contains(lines[1], "aaaaaaaaaaaa") {
		t.Errorf("gpu line %q: want the active digest and %q", lines[1], "compiling 3f2a1c9e0b7d for 12s")
	}
	if f := strings.Fields(lines[2]); f[len(f)-2] != "-" {
		t.Errorf("zone line %q: want - under LOADING", lines[2])
	}
}
