package lifecycle

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// startStatic starts the lifecycle of one static policy (its arguments as
// JSON, with a probation of a second) fed by src, without a client: its
// state lives in memory. deliver runs while Start waits for the first
// version. The lifecycle is closed when t ends.
func startStatic(t *testing.T, policyJSON string, src source.Source, deliver func()) *Lifecycle {
	t.Helper()
	a := Args{Policies: []PolicyArgs{testArgs(t, policyJSON)}, Probation: &metav1.Duration{Duration: time.Second}}
	SetDefaults(&a)
	cache, err := source.OpenCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	type started struct {
		l   *Lifecycle
		err error
	}
	done := make(chan started, 1)
	go func() {
		l, err := Start(&a, Options{ModuleCache: cache, NewSource: func(PolicyArgs) source.Source { return src }})
		done <- started{l, err}
	}()
	deliver()
	st := <-done
	if st.err != nil {
		t.Fatal(st.err)
	}
	t.Cleanup(st.l.Close)
	return st.l
}

// state is the static policy's state as its store keeps it.
func state(l *Lifecycle, name string) api.SchedulingPolicyStatus {
	sp, _ := l.cat.store.get(name)
	return sp.Status
}

// A static policy lives the SchedulingPolicies' lifecycle: a broken first
// version does not stop start-up but leaves the policy without a version,
// blocking pods with the reason; a good one serves, is proven after its
// probation (the last good revision recorded, its module in the module
// cache), and a broken upload or the source's error is refused while it
// keeps serving, with the Rejected condition saying why.
func TestStaticLifecycle(t *testing.T) {
	a := testwasm.Bytes(t, "test/guests/versions/a")
	bad := []byte("\x00asm\x01\x00\x00\x00 not a policy")
	src := newFakeSource()
	l := startStatic(t, `{"name": "pin", "source": {"file": "unused"}}`, src, func() { src.version(bad, "test bad") })
	s := l.Roster().Slot("pin")
	if s == nil || s.Current() != nil || !s.BlocksWithoutVersion() {
		t.Fatalf("after a broken first version: slot %v, want one without a version that blocks", s)
	}
	if why := s.NoVersionReason(); !strings.Contains(why, "not a valid WebAssembly module") {
		t.Fatalf("no version because %q, want the module's fault", why)
	}

	src.version(a, "test a")
	digestA := source.Digest(a)
	waitFor(t, "version a serving", func() bool { return s.Current() != nil && s.Current().Digest() == digestA })
	st := state(l, "pin")
	waitFor(t, "version a proven", func() bool { st = state(l, "pin"); return st.LastGood != nil })
	if st.LastGood.Module.SHA256 != digestA {
		t.Fatalf("last good %+v, want a", st.LastGood)
	}
	if _, err := l.opts.ModuleCache.Get(digestA); err != nil {
		t.Fatalf("the last good module is not cached: %v", err)
	}

	src.version(bad, "test bad again")
	waitFor(t, "the broken upload refused", func() bool {
		c := meta.FindStatusCondition(state(l, "pin").Conditions, api.ConditionRejected)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == api.ReasonLoadFailed
	})
	if s.Current() == nil || s.Current().Digest() != digestA {
		t.Fatal("a broken upload replaced the version serving")
	}
	src.events <- func(h source.Handlers) {
		h.Error(errors.New("configmap wasmsched-system/pin-1: chunk sha256 mismatch"))
	}
	<-src.took
	waitFor(t, "the source's error refused", func() bool {
		c := meta.FindStatusCondition(state(l, "pin").Conditions, api.ConditionRejected)
		return c != nil && c.Reason == api.ReasonFetch && strings.Contains(c.Message, "chunk sha256 mismatch")
	})
	if s.Current() == nil || s.Current().Digest() != digestA {
		t.Fatal("the source's error replaced the version serving")
	}
	// The upload repaired with the module serving: ready again, nothing
	// to load.
	src.version(a, "test a again")
	waitFor(t, "ready again", func() bool {
		c := meta.FindStatusCondition(state(l, "pin").Conditions, api.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	if n := s.load.begun.Load(); n != 3 {
		t.Errorf("%d loads, want 3 (bad, a, bad again): the module serving is not loaded again", n)
	}
}

// A static policy whose source reports it deleted at start-up (no
// ConfigMaps; onDelete Keep) and that has no last good revision settles at
// once without a version, pods held with the reason; the source's next
// report is acted on, though the spec still names no module.
func TestStaticDeletedAtStart(t *testing.T) {
	src := newFakeSource()
	l := startStatic(t, `{"name": "gone", "source": {"configMap": "gone"}}`, src, func() { src.deleted() })
	s := l.Roster().Slot("gone")
	if why := s.NoVersionReason(); s.Current() != nil || !s.BlocksWithoutVersion() || !strings.Contains(why, "configMap gone does not exist") {
		t.Fatalf("after start-up: version %v, blocks %v, reason %q; want none, blocking, the missing ConfigMaps named", s.Current(), s.BlocksWithoutVersion(), why)
	}
	src.events <- func(h source.Handlers) {
		h.Error(errors.New("configmap wasmsched-system/gone-1: chunk sha256 mismatch"))
	}
	<-src.took
	waitFor(t, "the source's error as the reason", func() bool { return strings.Contains(s.NoVersionReason(), "chunk sha256 mismatch") })
}
