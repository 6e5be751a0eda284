package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func TestMain(m *testing.M) { testwasm.Main(m, RegisterMetrics) }

// slowSettings make the probe spin about 5s in its settings hook, under
// the 10s init deadline: a version that loads, slowly. stuckSettings make
// it spin until that deadline: a version refused after 10s.
const (
	slowSettings  = `{"at": "settings", "how": "sleep"}`
	stuckSettings = `{"at": "settings", "how": "loop"}`
)

// fakeSource delivers what the test tells it to, calling the handlers on
// its Run goroutine one at a time, as real sources do.
type fakeSource struct {
	events chan func(source.Handlers)
	took   chan time.Duration
}

func newFakeSource() *fakeSource {
	return &fakeSource{events: make(chan func(source.Handlers)), took: make(chan time.Duration)}
}

func (f *fakeSource) Run(ctx context.Context, h source.Handlers) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-f.events:
			start := time.Now()
			e(h)
			f.took <- time.Since(start)
		}
	}
}

// version delivers module and returns how long the Version handler took.
func (f *fakeSource) version(module []byte, origin string) time.Duration {
	f.events <- func(h source.Handlers) {
		h.Version(source.Version{Module: module, Digest: source.Digest(module), Origin: origin})
	}
	return <-f.took
}

func (f *fakeSource) deleted() {
	f.events <- func(h source.Handlers) { h.Deleted() }
	<-f.took
}

// testArgs decodes, defaults and validates the arguments of one policy.
func testArgs(t *testing.T, policyJSON string) PolicyArgs {
	t.Helper()
	var a Args
	if err := json.Unmarshal([]byte(`{"policies": [`+policyJSON+`]}`), &a); err != nil {
		t.Fatal(err)
	}
	SetDefaults(&a)
	if errs := Validate(&a); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return a.Policies[0]
}

// newTestSlot is a slot of policy name with settings (and extra fields),
// without a scheduler around it.
func newTestSlot(t *testing.T, name, settings, extra string) *Slot {
	t.Helper()
	return newSlot(testArgs(t, `{"name": "`+name+`", "source": {"configMap": "`+name+`"}, "settings": `+settings+extra+`}`), false, nil)
}

// run starts s's loader, wires src straight to it (each version a request
// keyed by its digest) and waits, after the test delivered what deliver
// sends, until nothing is waiting or loading: it returns the refusal when
// nothing serves then. The slot stops when the test ends.
func run(t *testing.T, s *Slot, src *fakeSource, deliver func()) (context.CancelFunc, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s.startLoader(ctx, klog.Background())
	go src.Run(ctx, source.Handlers{
		Version: func(v source.Version) { s.offerRequest(&request{v: v, at: time.Now(), key: v.Digest}) },
		Deleted: s.offerDeleted,
	})
	deliver()
	waitFor(t, "the first version's load to end", func() bool { return !s.loading() })
	t.Cleanup(func() {
		cancel()
		s.close()
		waitFor(t, "abandoned loads to return", func() bool { return s.load.inFlight.Load() == 0 })
	})
	if s.Current() == nil {
		if r := s.Status().LastRejected; r != nil {
			return cancel, errors.New(r.Error)
		}
		return cancel, errors.New("nothing serves")
	}
	return cancel, nil
}

func waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	return testwasm.WaitFor(t, what, cond)
}

func digestOf(s *Slot) string { return s.currentDigest() }

func counter(t *testing.T, policy, result string) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(reloadsTotal.WithLabelValues(policy, result))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// warm loads module once so that the compilation cache holds it: its
// later loads then take milliseconds, and a timing says something about
// the loader, not the compiler.
func warm(t *testing.T, s *Slot, module []byte) {
	t.Helper()
	p, err := loadVersion(context.Background(), klog.Background(), *s.Args(), module, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Close(context.Background())
}

// waitLoading waits until the status shows digest loading at stage, and
// returns the time of the last look that did not: the stage began after it.
func waitLoading(t *testing.T, s *Slot, digest, stage string) (notBefore time.Time) {
	t.Helper()
	waitFor(t, "status loading "+digest[:12]+" "+stage, func() bool {
		l := s.Status().Loading
		if l != nil && l.Digest == digest && l.Stage == stage {
			return true
		}
		notBefore = time.Now()
		return false
	})
	return notBefore
}

// publishedStatuses records the status s publishes at each change (its
// onChange, which the test slot leaves unset); check fails t for each one
// that shows a version loading while it is already the serving, the
// rejected or the superseded one: whatever ends a load publishes the
// status without it.
func publishedStatuses(s *Slot) (check func(t *testing.T)) {
	var mu sync.Mutex
	var seen []SlotStatus
	s.onChange = func() {
		st := s.Status()
		mu.Lock()
		seen = append(seen, st)
		mu.Unlock()
	}
	return func(t *testing.T) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for i, st := range seen {
			l := st.Loading
			switch {
			case l == nil:
			case l.Digest == st.Digest:
				t.Errorf("status %d published %s serving and loading", i, api.ShortDigest(l.Digest))
			case st.LastRejected != nil && st.LastRejected.Digest == l.Digest && st.LastRejected.At.After(l.Since):
				t.Errorf("status %d published %s rejected and still loading", i, api.ShortDigest(l.Digest))
			case st.LastSuperseded != nil && st.LastSuperseded.Digest == l.Digest && st.LastSuperseded.At.After(l.Since):
				t.Errorf("status %d published %s superseded and still loading", i, api.ShortDigest(l.Digest))
			}
		}
		if len(seen) == 0 {
			t.Error("no status published")
		}
	}
}

// A newer version supersedes a load in flight: the source's handler
// returns at once, the status shows the stuck version initialising, the
// good version serves before the stuck one's 10s init deadline, and the
// stuck one is recorded as superseded, not rejected (as it would be, had it
// run to its deadline), and never installed.
func TestNewerVersionSupersedesLoad(t *testing.T) {
	a, b := testwasm.Bytes(t, "test/guests/versions/a"), testwasm.Bytes(t, "test/guests/versions/b")
	slow := testwasm.Bytes(t, "test/guests/probe")
	s := newTestSlot(t, "supersede", stuckSettings, "")
	checkPublished := publishedStatuses(s)
	warm(t, s, b)
	src := newFakeSource()
	if _, err := run(t, s, src, func() { src.version(a, "test a") }); err != nil {
		t.Fatalf("start: %v", err)
	}
	if digestOf(s) != source.Digest(a) {
		t.Fatalf("serving %s after start, want a", api.ShortDigest(digestOf(s)))
	}

	if took := src.version(slow, "test slow"); took > 500*time.Millisecond {
		t.Fatalf("the Version handler took %v: it must hand the version over and return", took)
	}
	initFrom := waitLoading(t, s, source.Digest(slow), "initialising")
	sent := time.Now()
	if took := src.version(b, "test b"); took > 500*time.Millisecond {
		t.Fatalf("the Version handler took %v while a load was in flight", took)
	}
	want := source.Digest(b)
	waitFor(t, "version b serving", func() bool { return digestOf(s) == want })
	// The stuck version's settings hook spins until its 10s deadline,
	// counted from when it began initialising, after initFrom, whatever the
	// load on the machine: b serving before initFrom+10s serves before the
	// stuck load could end.
	if d := time.Since(initFrom); d >= 10*time.Second {
		t.Fatalf("b serving %v after the stuck version began initialising: it waited for the superseded load (or the machine is too busy to tell)", d)
	}
	t.Logf("b serving %v after its upload, %v after the stuck version began initialising (10s deadline)", time.Since(sent), time.Since(initFrom))

	st := s.Status()
	if st.Loading != nil {
		t.Fatalf("status still loading %+v", *st.Loading)
	}
	if st.LastRejected != nil {
		t.Fatalf("a superseded version was reported rejected: %+v", *st.LastRejected)
	}
	sup := st.LastSuperseded
	if sup == nil || sup.Digest != source.Digest(slow) || sup.By != source.Digest(b) || sup.Stage != "initialising" || sup.Origin != "test slow" {
		t.Fatalf("lastSuperseded = %+v, want the slow version, by b, while initialising", sup)
	}
	if got := counter(t, "supersede", "superseded"); got != 1 {
		t.Errorf("reloads_total{result=superseded} = %v, want 1", got)
	}
	if got := counter(t, "supersede", "rejected"); got != 0 {
		t.Errorf("reloads_total{result=rejected} = %v, want 0", got)
	}

	// Once the abandoned load returns (refused at its deadline), nothing
	// is reported of it.
	waitFor(t, "the abandoned load to return", func() bool { return s.load.inFlight.Load() == 0 })
	time.Sleep(50 * time.Millisecond)
	if digestOf(s) != source.Digest(b) {
		t.Fatalf("serving %s after the abandoned load returned, want b", api.ShortDigest(digestOf(s)))
	}
	if st := s.Status(); st.Reloads != 1 || st.LastRejected != nil {
		t.Fatalf("reloads = %d, lastRejected = %+v: want 1 (a -> b) and nothing rejected", st.Reloads, st.LastRejected)
	}
	if got := counter(t, "supersede", "rejected"); got != 0 {
		t.Errorf("reloads_total{result=rejected} = %v after the abandoned load returned, want 0", got)
	}
	checkPublished(t)
}

// The same digest handed over again while it loads is not loaded twice,
// nor once it serves.
func TestSameDigestLoadsOnce(t *testing.T) {
	a, slow := testwasm.Bytes(t, "test/guests/versions/a"), testwasm.Bytes(t, "test/guests/probe")
	s := newTestSlot(t, "samedigest", slowSettings, "")
	src := newFakeSource()
	if _, err := run(t, s, src, func() { src.version(a, "test a") }); err != nil {
		t.Fatalf("start: %v", err)
	}
	src.version(slow, "first upload")
	waitLoading(t, s, source.Digest(slow), "initialising")
	src.version(slow, "second upload")
	if l := s.Status().Loading; l == nil || l.Origin != "first upload" {
		t.Fatalf("loading %+v, want the first upload still", l)
	}
	slowDigest := source.Digest(slow)
	waitFor(t, "the slow version serving", func() bool { return digestOf(s) == slowDigest })
	src.version(slow, "third upload")
	time.Sleep(50 * time.Millisecond)
	if n := s.load.begun.Load(); n != 2 {
		t.Fatalf("%d loads begun, want 2 (a, then the slow version once)", n)
	}
	st := s.Status()
	if st.LastSuperseded != nil || st.LastRejected != nil || st.Loading != nil {
		t.Fatalf("status %+v: want nothing superseded, rejected or loading", st)
	}
	if got := counter(t, "samedigest", "superseded"); got != 0 {
		t.Errorf("reloads_total{result=superseded} = %v, want 0", got)
	}
}

// The first version's load ends in its own outcome: a bad first version is
// refused with its reason and nothing serves; one superseded is no answer,
// the version that replaced it is.
func TestFirstVersionOutcome(t *testing.T) {
	a, slow := testwasm.Bytes(t, "test/guests/versions/a"), testwasm.Bytes(t, "test/guests/probe")
	bad := []byte("\x00asm\x01\x00\x00\x00 but not really")

	t.Run("bad first version", func(t *testing.T) {
		s := newTestSlot(t, "startbad", slowSettings, "")
		src := newFakeSource()
		_, err := run(t, s, src, func() { src.version(bad, "test bad") })
		if err == nil || !strings.Contains(err.Error(), "not a valid WebAssembly module") {
			t.Fatalf("start: %v, want the module's fault", err)
		}
		if s.Current() != nil || s.Status().LastRejected == nil {
			t.Fatalf("current %v, status %+v: want nothing serving and the rejection recorded", s.Current(), s.Status())
		}
	})
	t.Run("slow first version superseded by a bad one", func(t *testing.T) {
		s := newTestSlot(t, "startslowbad", slowSettings, "")
		checkPublished := publishedStatuses(s)
		src := newFakeSource()
		begin := time.Now()
		_, err := run(t, s, src, func() {
			src.version(slow, "test slow")
			waitLoading(t, s, source.Digest(slow), "initialising")
			src.version(bad, "test bad")
		})
		if err == nil || !strings.Contains(err.Error(), "not a valid WebAssembly module") {
			t.Fatalf("start: %v, want the bad version's fault", err)
		}
		if sup := s.Status().LastSuperseded; sup == nil || sup.Digest != source.Digest(slow) {
			t.Fatalf("lastSuperseded %+v, want the slow version", sup)
		}
		t.Logf("refused after %v, the superseded load still running: %d", time.Since(begin), s.load.inFlight.Load())
		checkPublished(t)
	})
	t.Run("slow first version superseded by a good one", func(t *testing.T) {
		s := newTestSlot(t, "startslowgood", slowSettings, "")
		src := newFakeSource()
		_, err := run(t, s, src, func() {
			src.version(slow, "test slow")
			waitLoading(t, s, source.Digest(slow), "initialising")
			src.version(a, "test a")
		})
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		if digestOf(s) != source.Digest(a) {
			t.Fatalf("serving %s, want a", api.ShortDigest(digestOf(s)))
		}
	})
}

// Shutting down abandons the load in flight: the loader stops at once and
// nothing is installed afterwards.
func TestShutdownAbandonsLoad(t *testing.T) {
	a, slow := testwasm.Bytes(t, "test/guests/versions/a"), testwasm.Bytes(t, "test/guests/probe")
	s := newTestSlot(t, "shutdown", slowSettings, "")
	src := newFakeSource()
	cancel, err := run(t, s, src, func() { src.version(a, "test a") })
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	src.version(slow, "test slow")
	waitLoading(t, s, source.Digest(slow), "initialising")
	begin := time.Now()
	cancel()
	s.close()
	if d := time.Since(begin); d > time.Second {
		t.Fatalf("shutdown took %v with a load in flight", d)
	}
	waitFor(t, "the abandoned load to return", func() bool { return s.load.inFlight.Load() == 0 })
	if s.Current() != nil {
		t.Fatalf("serving %s after shutdown", api.ShortDigest(digestOf(s)))
	}
}

// With onDelete Deactivate, deleting the source abandons the load in
// flight and deactivates the policy; nothing is installed afterwards.
func TestDeactivateSupersedesLoad(t *testing.T) {
	a, slow := testwasm.Bytes(t, "test/guests/versions/a"), testwasm.Bytes(t, "test/guests/probe")
	s := newTestSlot(t, "deactivate", slowSettings, `, "onDelete": "Deactivate"`)
	src := newFakeSource()
	if _, err := run(t, s, src, func() { src.version(a, "test a") }); err != nil {
		t.Fatalf("start: %v", err)
	}
	src.version(slow, "test slow")
	waitLoading(t, s, source.Digest(slow), "initialising")
	src.deleted()
	waitFor(t, "the policy deactivated", func() bool { return s.Current() == nil })
	st := s.Status()
	if st.Active || st.Loading != nil {
		t.Fatalf("status %+v: want inactive, nothing loading", st)
	}
	if sup := st.LastSuperseded; sup == nil || sup.Digest != source.Digest(slow) || sup.By != "" {
		t.Fatalf("lastSuperseded %+v, want the slow version, by the deletion", sup)
	}
	waitFor(t, "the abandoned load to return", func() bool { return s.load.inFlight.Load() == 0 })
	time.Sleep(50 * time.Millisecond)
	if s.Current() != nil {
		t.Fatalf("serving %s after deactivation", api.ShortDigest(digestOf(s)))
	}
}

// Handing over the version that serves again abandons the load in flight:
// the way out of a stuck load is to push the previous version.
func TestRollbackAbandonsLoad(t *testing.T) {
	a, slow := testwasm.Bytes(t, "test/guests/versions/a"), testwasm.Bytes(t, "test/guests/probe")
	s := newTestSlot(t, "rollback", slowSettings, "")
	src := newFakeSource()
	if _, err := run(t, s, src, func() { src.version(a, "test a") }); err != nil {
		t.Fatalf("start: %v", err)
	}
	src.version(slow, "test slow")
	waitLoading(t, s, source.Digest(slow), "initialising")
	src.version(a, "test a again")
	waitFor(t, "nothing loading", func() bool { return s.Status().Loading == nil })
	st := s.Status()
	if sup := st.LastSuperseded; sup == nil || sup.Digest != source.Digest(slow) || sup.By != source.Digest(a) {
		t.Fatalf("lastSuperseded %+v, want the slow version, by a", sup)
	}
	waitFor(t, "the abandoned load to return", func() bool { return s.load.inFlight.Load() == 0 })
	time.Sleep(50 * time.Millisecond)
	if digestOf(s) != source.Digest(a) || s.load.begun.Load() != 2 || s.Status().Reloads != 0 {
		t.Fatalf("serving %s after %d loads and %d reloads, want a, 2 loads (a, slow) and no reload", api.ShortDigest(digestOf(s)), s.load.begun.Load(), s.Status().Reloads)
	}
}

// A newer version abandons a load that is still compiling: the per-load
// context reaches engine.Compile, which kills its compiler child, so the
// abandoned load returns long before the compile would have ended. (The
// newer version is the one serving, so that no other load runs and the
// time measured is the abandoned one's alone.)
func TestNewerVersionAbandonsCompile(t *testing.T) {
	a := testwasm.Bytes(t, "test/guests/versions/a")
	// Under -race wazero's compiler is several times slower: a smaller
	// module still takes seconds, to the end.
	n := 100_000
	if testwasm.Race {
		n = 25_000
	}
	costly := testwasm.CostlyModule(n)
	s := newTestSlot(t, "abandoncompile", slowSettings, "")
	src := newFakeSource()
	if _, err := run(t, s, src, func() { src.version(a, "test a") }); err != nil {
		t.Fatalf("start: %v", err)
	}
	src.version(costly, "test costly")
	waitLoading(t, s, source.Digest(costly), "compiling")
	cancelled := time.Now()
	src.version(a, "test a again")
	waitFor(t, "the abandoned compile to return", func() bool { return s.load.inFlight.Load() == 0 })
	abandoned := time.Since(cancelled)
	st := s.Status()
	if sup := st.LastSuperseded; sup == nil || sup.Digest != source.Digest(costly) || sup.Stage != "compiling" || st.LastRejected != nil || digestOf(s) != source.Digest(a) {
		t.Fatalf("status %+v: want a serving, the costly version superseded while compiling, nothing rejected", st)
	}

	// The same compile, to its end (the killed child cached nothing).
	begin := time.Now()
	_, err := loadVersion(context.Background(), klog.Background(), *s.Args(), costly, nil, nil)
	full := time.Since(begin)
	if err == nil || !strings.Contains(err.Error(), "does not export") {
		t.Fatalf("the costly module loaded to its end: %v, want it compiled and refused for its exports", err)
	}
	t.Logf("abandoned compile returned %v after the newer version arrived; compiling it to the end takes %v", abandoned, full)
	if abandoned > full/2 {
		t.Fatalf("the abandoned compile took %v to return, against %v for the whole compile: the cancellation did not reach it", abandoned, full)
	}
}
