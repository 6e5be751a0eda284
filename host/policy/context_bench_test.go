package policy

import (
	"context"
	"fmt"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// BenchmarkContextSync measures what context costs a scheduling cycle:
// objects: every one of 1000 ElasticQuota-like objects changed, then one
// cycle (each object sent once): the sync cost per object;
// change: one object changed, then one cycle; nochange: a cycle with
// nothing to send, the baseline. It also reports the guest's linear memory
// growth for holding 1000 such objects (memory/1000obj), read from the
// instance's memory size before and after the first sync.
func BenchmarkContextSync(b *testing.B) {
	load := func(b *testing.B) (*Policy, *contextFixture) {
		p, err := Load(context.Background(), Options{Name: "probe", Wasm: testwasm.Bytes(b, "test/guests/probe"), Settings: []byte(contextSettings), MaxInstances: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = p.Close(context.Background()) })
		f := bindContext(b, p)
		p.onContextSync = nil
		return p, f
	}
	n := mkNode("n1", nil)
	nodes := []fwk.NodeInfo{n}
	var fillN func(b *testing.B, f *contextFixture, rv, objects int)
	cycle := func(b *testing.B, p *Policy) {
		if _, err := p.Filter(ctx, NewCycle(mkPod("p"), nodes), n); err != nil {
			b.Fatal(err)
		}
	}
	const objects = 1000
	fill := func(b *testing.B, f *contextFixture, rv int) { fillN(b, f, rv, objects) }
	fillN = func(b *testing.B, f *contextFixture, rv, objects int) {
		for i := range objects {
			if err := f.eq.Set(elasticQuota(fmt.Sprint("ns", i%50), fmt.Sprint("q", i), fmt.Sprint(rv), 0)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("objects", func(b *testing.B) {
		p, f := load(b)
		fill(b, f, 1)
		cycle(b, p)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			fill(b, f, i+2)
			b.StartTimer()
			cycle(b, p)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*objects), "ns/object")
	})
	// Linear memory grows by 64 KiB pages: the growth over 20,000 objects,
	// per 1000, is finer than that of 1000.
	b.Run("memory", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			p, f := load(b)
			cycle(b, p)
			before := p.GuestMemory()[0]
			fillN(b, f, 1, 20*objects)
			cycle(b, p)
			b.ReportMetric(float64(p.GuestMemory()[0]-before)/20, "guest-bytes/1000obj")
		}
	})
	b.Run("change", func(b *testing.B) {
		p, f := load(b)
		fill(b, f, 1)
		cycle(b, p)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := f.eq.Set(elasticQuota("ns0", "q0", fmt.Sprint(i+2), 0)); err != nil {
				b.Fatal(err)
			}
			cycle(b, p)
		}
	})
	b.Run("nochange", func(b *testing.B) {
		p, f := load(b)
		fill(b, f, 1)
		cycle(b, p)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			cycle(b, p)
		}
	})
}
