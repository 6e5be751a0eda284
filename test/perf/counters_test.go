package perf

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/component-base/metrics/legacyregistry"
)

// schedCounters are the scheduler's counters the report reads, summed
// over profiles (each workload has one). scheduler_perf's own collector
// reads histograms only.
type schedCounters struct {
	// Batch is scheduler_batch_attempts_total by result: hint_used,
	// hint_not_used, no_hint (opportunistic batching, k8s 1.35+).
	Batch map[string]float64 `json:"batch,omitempty"`
	// Flushed is scheduler_batch_cache_flushed_total by reason: why a
	// cycle's results could not serve the next pod.
	Flushed map[string]float64 `json:"flushed,omitempty"`
	// Incoming is scheduler_queue_incoming_pods_total by "event queue":
	// the pods added to the active, backoff and unschedulable queues, and
	// why (a cluster event's label, ScheduleAttemptFailure, BackoffComplete,
	// UnscheduledPodAdd for new pods, ...).
	Incoming map[string]float64 `json:"incoming,omitempty"`
	// Attempts is scheduler_schedule_attempts_total by result: scheduled,
	// unschedulable, error.
	Attempts map[string]float64 `json:"attempts,omitempty"`
	// CPU is the test process's CPU time, user and system, in seconds:
	// the scheduler's and the API server's (etcd runs apart). Per
	// scheduled pod it compares profiles where throughput, which other
	// processes on the machine move, cannot.
	CPU float64 `json:"cpuSeconds,omitempty"`
}

// gatherCounters reads the counters now.
func gatherCounters() (schedCounters, error) {
	c := schedCounters{Batch: map[string]float64{}, Flushed: map[string]float64{}, Incoming: map[string]float64{}, Attempts: map[string]float64{}, CPU: processCPU()}
	// The registry is the API server's too: a collector of its failing
	// makes Gather return an error beside every family it did gather, the
	// scheduler's counters among them.
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil && len(families) == 0 {
		return c, err
	}
	for _, f := range families {
		var into map[string]float64
		var keys []string
		switch f.GetName() {
		case "scheduler_batch_attempts_total":
			into, keys = c.Batch, []string{"result"}
		case "scheduler_batch_cache_flushed_total":
			into, keys = c.Flushed, []string{"reason"}
		case "scheduler_queue_incoming_pods_total":
			into, keys = c.Incoming, []string{"event", "queue"}
		case "scheduler_schedule_attempts_total":
			into, keys = c.Attempts, []string{"result"}
		default:
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			key := labels[keys[0]]
			for _, k := range keys[1:] {
				key += " " + labels[k]
			}
			into[key] += m.GetCounter().GetValue()
		}
	}
	return c, nil
}

// since returns c minus an earlier reading, without the zero entries.
func (c schedCounters) since(earlier schedCounters) schedCounters {
	sub := func(now, then map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for k, v := range now {
			if d := v - then[k]; d != 0 {
				out[k] = d
			}
		}
		return out
	}
	return schedCounters{Batch: sub(c.Batch, earlier.Batch), Flushed: sub(c.Flushed, earlier.Flushed), Incoming: sub(c.Incoming, earlier.Incoming), Attempts: sub(c.Attempts, earlier.Attempts), CPU: c.CPU - earlier.CPU}
}

// measuredNamespace is where the GPU, Basic, Churn and Gang workloads create their
// measured pods. Quota creates them in its tenants' namespaces, labelled
// measuredLabel (testdata/pod-cpu-measured.yaml).
const (
	measuredNamespace = "measure"
	measuredLabel     = "perf.wasmsched.io/measured"
)

// counterWatch reads the counters at the start of a workload, when its
// first measured pod appears (in namespace measure or labelled
// measuredLabel) and at the end.
type counterWatch struct {
	mu              sync.Mutex
	start, measured *schedCounters
	cancel          context.CancelFunc
	// profile is the measured part's CPU profile while it is written
	// (-measured-cpuprofile).
	profile *os.File
	// trace is the measured part's execution trace while it is written
	// (-measured-trace).
	trace   *os.File
	stopped bool
}

// watchCounters starts a counterWatch for the workload tCtx runs;
// atMeasured, if set, is called when the first measured pod appears, before
// the measured part's CPU profile starts.
func watchCounters(tCtx tContext, atMeasured func()) *counterWatch {
	w := &counterWatch{}
	if c, err := gatherCounters(); err != nil {
		tCtx.Logf("scheduler counters: %v", err)
	} else {
		w.start = &c
	}
	ctx, cancel := context.WithCancel(tCtx)
	w.cancel = cancel
	if w.start != nil {
		go w.failOnErrors(ctx, tCtx)
	}
	go func() {
		if !awaitMeasured(ctx, tCtx) {
			return
		}
		c, err := gatherCounters()
		if err != nil {
			tCtx.Logf("scheduler counters at the first measured pod: %v", err)
		}
		if atMeasured != nil {
			atMeasured()
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if err == nil {
			w.measured = &c
		}
		if *measuredProfile != "" && !w.stopped {
			w.profile = startMeasured(tCtx, "measured-cpuprofile", "-test.cpuprofile", *measuredProfile, pprof.StartCPUProfile)
		}
		if *measuredTrace != "" && !w.stopped {
			w.trace = startMeasured(tCtx, "measured-trace", "-test.trace", *measuredTrace, trace.Start)
		}
	}()
	return w
}

// awaitMeasured waits for the workload's first measured pod, by namespace
// or by label, whichever the workload uses; false when ctx ends first. A
// watch that ends before (the API server closes watches of its own accord)
// is opened again, after a list for a measured pod created in between.
func awaitMeasured(ctx context.Context, tCtx tContext) bool {
	pods := tCtx.Client().CoreV1().Pods
	selectors := []struct {
		namespace string
		opts      metav1.ListOptions
	}{
		{measuredNamespace, metav1.ListOptions{}},
		{metav1.NamespaceAll, metav1.ListOptions{LabelSelector: measuredLabel}},
	}
	for first := true; ; first = false {
		var watches []watch.Interface
		stop := func() {
			for _, w := range watches {
				w.Stop()
			}
		}
		for _, sel := range selectors {
			w, err := pods(sel.namespace).Watch(ctx, sel.opts)
			if err != nil {
				stop()
				if ctx.Err() == nil {
					tCtx.Logf("watch the measured pods: %v", err)
				}
				return false
			}
			watches = append(watches, w)
		}
		if !first {
			for _, sel := range selectors {
				opts := sel.opts
				opts.Limit = 1
				if l, err := pods(sel.namespace).List(ctx, opts); err == nil && len(l.Items) > 0 {
					stop()
					return true
				}
			}
		}
		found, why := firstPod(ctx, watches[0], watches[1])
		stop()
		if found || ctx.Err() != nil {
			return found
		}
		tCtx.Logf("watch for the measured pods ended (%s); watching again", why)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond): // not a tight loop should it end at once again
		}
	}
}

// firstPod waits for a pod added or changed on either watch: true then,
// false with the reason when a watch ends or reports an error first.
func firstPod(ctx context.Context, a, b watch.Interface) (bool, string) {
	for {
		var e watch.Event
		var ok bool
		select {
		case e, ok = <-a.ResultChan():
		case e, ok = <-b.ResultChan():
		case <-ctx.Done():
			return false, ctx.Err().Error()
		}
		switch {
		case !ok:
			return false, "closed"
		case e.Type == watch.Added || e.Type == watch.Modified:
			return true, ""
		case e.Type == watch.Error:
			return false, fmt.Sprintf("error event: %v", apierrors.FromObject(e.Object))
		}
	}
}

// maxAttemptErrors is how many scheduling attempts may end in an error
// with no pod scheduled for stallTime before the workload is stopped. A
// policy that fails every attempt of a pod makes the scheduler retry it
// forever and the workload wait for it until its timeout (an hour at 5000
// nodes). Errors while pods still get scheduled are no such stall: Churn
// deletes pods the scheduler is binding (their binding fails, "context
// canceled"), hundreds in a run.
const (
	maxAttemptErrors = 100
	stallTime        = time.Minute
)

// failOnErrors cancels the workload, saying why, once more than
// maxAttemptErrors scheduling attempts ended in an error and no pod was
// scheduled for stallTime. It reads the counters every few seconds until
// ctx ends.
func (w *counterWatch) failOnErrors(ctx context.Context, tCtx tContext) {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	scheduled, errors, progress := w.start.Attempts["scheduled"], w.start.Attempts["error"], time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		c, err := gatherCounters()
		if err != nil {
			continue
		}
		if c.Attempts["scheduled"] > scheduled {
			scheduled, errors, progress = c.Attempts["scheduled"], c.Attempts["error"], time.Now()
			continue
		}
		if n := c.Attempts["error"] - errors; n > maxAttemptErrors && time.Since(progress) > stallTime {
			tCtx.Cancel(fmt.Sprintf("no pod scheduled for %v while %.0f scheduling attempts ended in an error (the scheduler's \"Error scheduling pod\" lines say why): the workload cannot finish", time.Since(progress).Round(time.Second), n))
			return
		}
	}
}

// stop returns the counters' changes over the whole workload ("run") and
// from the first measured pod on ("measured", when there was one).
func (w *counterWatch) stop() map[string]schedCounters {
	w.cancel()
	w.mu.Lock()
	w.stopped = true
	if w.profile != nil {
		pprof.StopCPUProfile()
		_ = w.profile.Close()
		w.profile = nil
	}
	if w.trace != nil {
		trace.Stop()
		_ = w.trace.Close()
		w.trace = nil
	}
	w.mu.Unlock()
	end, err := gatherCounters()
	if err != nil || w.start == nil {
		return nil
	}
	out := map[string]schedCounters{"run": end.since(*w.start)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.measured != nil {
		out["measured"] = end.since(*w.measured)
	}
	return out
}

// startMeasured creates path and has start write into it (the CPU profile
// or the execution trace of the measured part); nil if it cannot, logged
// under the flag's name. whole is the test flag that writes the same for
// the whole process, which must not be set as well.
func startMeasured(tCtx tContext, flag, whole, path string, start func(io.Writer) error) *os.File {
	f, err := os.Create(path)
	if err != nil {
		tCtx.Logf("%s: %v", flag, err)
		return nil
	}
	if err := start(f); err != nil {
		tCtx.Logf("%s: %v (%s set as well?)", flag, err, whole)
		_ = f.Close()
		return nil
	}
	return f
}

// processCPU returns this process's CPU time so far (user and system), in
// seconds; 0 if unavailable.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// TestGuestSince: the measured part of the guest's export times is the
// end's calls and time less those at the first measured pod; exports not
// called since are left out, and no longest call is claimed for the part.
func TestGuestSince(t *testing.T) {
	start := map[string]exportTime{"sync": {Calls: 10, Ms: 900, MaxMs: 140}, "cycle": {Calls: 5, Ms: 2}}
	end := map[string]exportTime{"sync": {Calls: 15, Ms: 1000, MaxMs: 140}, "cycle": {Calls: 5, Ms: 2}, "filter": {Calls: 7, Ms: 3, MaxMs: 1}}
	got := guestSince(end, start)
	want := map[string]exportTime{"sync": {Calls: 5, Ms: 100}, "filter": {Calls: 7, Ms: 3}}
	if len(got) != len(want) {
		t.Fatalf("guestSince = %v, want %v", got, want)
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("guestSince[%s] = %+v, want %+v", name, got[name], w)
		}
	}
}
