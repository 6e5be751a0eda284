package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/guest/guesttest"
)

// BenchmarkPreFilter is one cycle's PreFilter with the Quota benchmark's
// shape (test/perf): 20 tenants with quotas from settings, each using
// some of its min.
func BenchmarkPreFilter(b *testing.B) {
	var qs []string
	mc := guesttest.MakeCluster()
	for i := range 20 {
		name := fmt.Sprintf("tenant-%d", i)
		qs = append(qs, fmt.Sprintf(`%q: {"min": {"cpu": "1000", "memory": "5Ti"}, "max": {"cpu": "2000", "memory": "10Ti"}, "weight": %d}`, name, i%4+1))
		mc.Usage("", name, map[string]string{"cpu": "300", "memory": "1Ti"}, 100)
	}
	p := guesttest.Load(b, `{"elasticQuotas": false, "quotas": {`+strings.Join(qs, ", ")+`}}`, DefaultSettings(), New)
	pod := podIn("tenant-3", "p", 100).Obj()
	c := mc.Cycle(pod, p.Kinds())
	b.ReportAllocs()
	for b.Loop() {
		if s := p.PreFilter(c); !s.IsSuccess() {
			b.Fatal(s)
		}
	}
}
