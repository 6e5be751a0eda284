//go:build !wasip1

package main

import (
	"testing"

	"github.com/wasmsched/wasmsched/internal/hosttest"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func TestMain(m *testing.M) { testwasm.Main(m) }

// Every test runs against the module built by each toolchain (Go and
// TinyGo), and the builds must give the same results (testwasm.Agree).
const pkg = "examples/quota"

func TestEvalRejectsBadSettings(t *testing.T) {
	hosttest.RejectsSettings(t, pkg, "quota", []hosttest.BadSettings{
		{Settings: `{"quotas": {"t": {"weight": 1001}}}`, Want: `"quotas.t.weight" must be 1 to 1000, got 1001`},
		{Settings: `{"quotas": {"t": {"min": {"cpu": "lots"}}}}`, Want: `"quotas.t.min.cpu" is not a non-negative quantity`},
		{Settings: `{"quotas": {"t": {"min": {"cpu": 4}, "max": {"cpu": 2}}}}`, Want: `min cpu 4 exceeds max 2`},
		{Settings: `{"tenantLable": "x"}`, Want: `unknown field "tenantLable"`},
	})
}
