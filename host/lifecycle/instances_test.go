package lifecycle

import (
	"testing"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// instancesOf is wasmsched_policy_instances{policy=name} as a scrape sees
// it, and whether the series exists.
func instancesOf(t *testing.T, name string) (float64, bool) {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "wasmsched_policy_instances" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "policy" && lp.GetValue() == name {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// wasmsched_policy_instances counts the instances of the version a policy
// runs and of the version it replaced until that one is closed; a
// deactivated policy has none; a policy whose plugin stopped is not
// reported.
func TestInstancesMetric(t *testing.T) {
	a, b := testwasm.Bytes(t, "test/guests/versions/a"), testwasm.Bytes(t, "test/guests/versions/b")
	idle, poll := retireIdle, retirePoll
	retireIdle, retirePoll = 2*time.Second, 20*time.Millisecond
	t.Cleanup(func() { retireIdle, retirePoll = idle, poll })

	s := newTestSlot(t, "instances", `{}`, `, "onDelete": "Deactivate"`)
	if n, ok := instancesOf(t, "instances"); ok {
		t.Fatalf("instances = %v before the plugin started, want no series", n)
	}
	src := newFakeSource()
	if _, err := run(t, s, src, func() { src.version(a, "test a") }); err != nil {
		t.Fatalf("start: %v", err)
	}
	guestTime.add(s) // as New does
	t.Cleanup(func() { guestTime.remove(s) })
	if n, ok := instancesOf(t, "instances"); n != 1 {
		t.Fatalf("instances = %v (series %v) with version a loaded, want 1", n, ok)
	}

	src.version(b, "test b")
	want := source.Digest(b)
	waitFor(t, "version b serving", func() bool { return digestOf(s) == want })
	if n, _ := instancesOf(t, "instances"); n != 2 {
		t.Fatalf("instances = %v just after the swap, want 2 (b's, and a's until it is retired)", n)
	}
	waitFor(t, "version a retired", func() bool { n, _ := instancesOf(t, "instances"); return n == 1 })

	src.deleted()
	waitFor(t, "the policy deactivated and b retired", func() bool {
		n, ok := instancesOf(t, "instances")
		return ok && n == 0 && s.Current() == nil
	})

	guestTime.remove(s)
	if n, ok := instancesOf(t, "instances"); ok {
		t.Fatalf("instances = %v after the plugin stopped, want no series", n)
	}
}
