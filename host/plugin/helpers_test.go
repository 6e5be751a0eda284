package plugin

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmsched/wasmsched/host/lifecycle"
	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// waitFor waits for cond, as long as the test binary may (testwasm.WaitFor).
func waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	return testwasm.WaitFor(t, what, cond)
}

// waitFailed waits for a FailedScheduling Event on pod ns/name and returns
// its message.
func waitFailed(t *testing.T, c kubernetes.Interface, ns, name string) string {
	t.Helper()
	var msg string
	waitFor(t, "a FailedScheduling Event on "+ns+"/"+name, func() bool {
		evs, err := c.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=FailedScheduling,involvedObject.name=" + name})
		if err == nil && len(evs.Items) > 0 {
			msg = evs.Items[0].Message
		}
		return msg != ""
	})
	return msg
}

// testSource is a static policy's source that delivers what the test
// tells it to, on its Run goroutine, as real sources do.
type testSource struct{ versions chan []byte }

func newSource() *testSource { return &testSource{versions: make(chan []byte)} }

func (s *testSource) Run(ctx context.Context, h source.Handlers) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-s.versions:
			h.Version(source.Version{Module: m, Digest: source.Digest(m), Origin: "test"})
		}
	}
}

// deliver hands module to the policy and returns once its source took it.
func (s *testSource) deliver(module []byte) { s.versions <- module }

// startStatic starts the lifecycle of one static policy (its arguments as
// JSON) bound by bind, without a scheduler, its source delivering first
// at once; the test delivers later versions through the source returned.
// The lifecycle is closed when t ends.
func startStatic(t *testing.T, policyJSON string, bind lifecycle.BindFunc, first []byte) (*lifecycle.Lifecycle, *testSource) {
	t.Helper()
	a, err := DecodeArgs(&runtime.Unknown{Raw: []byte(`{"policies": [` + policyJSON + `]}`), ContentType: runtime.ContentTypeJSON})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := source.OpenCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := newSource()
	type started struct {
		lc  *lifecycle.Lifecycle
		err error
	}
	done := make(chan started, 1)
	go func() {
		lc, err := lifecycle.Start(a, lifecycle.Options{Bind: bind, ModuleCache: cache,
			NewSource: func(lifecycle.PolicyArgs) source.Source { return src }})
		done <- started{lc, err}
	}()
	src.deliver(first) // Start waits for it
	st := <-done
	if st.err != nil {
		t.Fatal(st.err)
	}
	t.Cleanup(st.lc.Close)
	return st.lc, src
}

// fixedPlugin is a plugin without a scheduler whose profile runs slots.
func fixedPlugin(slots ...*lifecycle.Slot) *Plugin {
	r := lifecycle.NewRoster(slots, nil)
	return &Plugin{rosters: func() *lifecycle.Roster { return r }}
}
