package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestQueueing checks what counts as a requeue and the batching and
// requeue lines built from test/perf's counters.
func TestQueueing(t *testing.T) {
	x := extra{Counters: map[string]counters{
		"run": {
			Batch:    map[string]float64{"hint_used": 30, "hint_not_used": 2, "no_hint": 8},
			Incoming: map[string]float64{"AssignedPodDelete backoff": 99},
		},
		"measured": {
			Incoming: map[string]float64{
				"UnscheduledPodAdd active": 2000, "BackoffComplete active": 40, "PopFromBackoffQ active": 1,
				"ScheduleAttemptFailure unschedulable": 500, "ScheduleAttemptFailure backoff": 7,
				"AssignedPodDelete backoff": 20, "AssignedPodAdd active": 3,
			},
			Attempts: map[string]float64{"scheduled": 2000, "unschedulable": 507},
			CPU:      25,
		},
	}}
	q, ok := x.queueing()
	if !ok || q.hintUsed != 30 || q.batchAttempts != 40 || q.requeues != 30 || q.unschedulable != 507 || q.phase != "measured" {
		t.Fatalf("queueing %+v, %v", q, ok)
	}
	if got, want := q.events(), "AssignedPodDelete 20, ScheduleAttemptFailure 7, AssignedPodAdd 3"; got != want {
		t.Errorf("events %q, want %q", got, want)
	}
	// A run whose first measured pod was not seen has counters of the
	// whole run only: left out of a mean over runs that have theirs.
	wholeOnly := extra{Counters: map[string]counters{"run": {
		Batch:    map[string]float64{"hint_used": 1000, "no_hint": 10},
		Attempts: map[string]float64{"scheduled": 20000}, CPU: 300,
	}}}
	r := &row{workload: "Churn 500Nodes", profile: "native", runs: []*run{{extra: x}, {extra: extra{}}, {extra: wholeOnly}}}
	r.queueing, r.hasQueueing = meanQueueing(r.runs)
	var out bytes.Buffer
	printSummary(&out, []*row{r})
	for _, want := range []string{"batching: 30 of 40 attempts used a hint", "requeues: 30 (measured part; 507 unschedulable attempts): AssignedPodDelete 20",
		"CPU: 12.50 ms per scheduled pod (measured part; scheduler and API server)\n",
		"1 of 3 runs recorded no measured part"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "15.00") {
		t.Errorf("summary counts the whole run's CPU per pod (15.00 ms):\n%s", out.String())
	}
}

// TestGuestTime: exports most time first, with the longest call when the
// run recorded it (older extra.json files did not, nor does the measured
// part).
func TestGuestTime(t *testing.T) {
	var x extra
	if err := json.Unmarshal([]byte(`{"guest": {"cycle": {"calls": 10, "ms": 1500}, "sync": {"calls": 3, "ms": 2500, "maxMs": 75.25}},
		"guestMeasured": {"cycle": {"calls": 4, "ms": 600}, "sync": {"calls": 1, "ms": 100}}}`), &x); err != nil {
		t.Fatal(err)
	}
	if got, want := x.Guest.String(), "sync 3 calls 2.50 s (longest 75.2 ms), cycle 10 calls 1.50 s"; got != want {
		t.Fatalf("Guest = %q, want %q", got, want)
	}
	if got, want := x.GuestMeasured.String(), "cycle 4 calls 0.60 s, sync 1 calls 0.10 s"; got != want {
		t.Fatalf("GuestMeasured = %q, want %q", got, want)
	}
}

// TestRatios: one line per workload with both toolchains, each round's
// ratio against native's run of the same round, memory per instance and
// RSS over native's.
func TestRatios(t *testing.T) {
	tp := func(v float64) *run { return &run{throughput: map[string]float64{"Average": v}} }
	native := &row{workload: "GPU 500Nodes", profile: "native", runs: []*run{tp(100), tp(80)},
		throughput: map[string]float64{"Average": 90}, extra: extra{PeakRSS: 400 << 20},
		hasQueueing: true, queueing: queueing{cpuPerPod: 8}}
	goRow := &row{workload: "GPU 500Nodes", profile: "wasm-go", runs: []*run{tp(95), tp(80)},
		throughput: map[string]float64{"Average": 87.5}, extra: extra{PeakRSS: 500 << 20, Instances: 4, GuestMemory: 40 << 20},
		hasQueueing: true, queueing: queueing{cpuPerPod: 9}}
	var out bytes.Buffer
	printRatios(&out, []*row{native, goRow}, false)
	for _, want := range []string{"wasm-tinygo / native (rounds)", "GPU 500Nodes", "0.97 [0.95 1.00]", "1.12", "10.0", "1.25"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("ratios lack %q:\n%s", want, out.String())
		}
	}
}

// TestGangPlacement: a Gang workload's counters, one line per run, the
// default profile named as upstream's built-in placement.
func TestGangPlacement(t *testing.T) {
	var x extra
	if err := json.Unmarshal([]byte(`{"gang": {"gangs": 240, "placed": 240, "bindings": 1920, "inSmall": 180, "inLarge": 60, "largeFree": 16, "smallWithRoom": 2}}`), &x); err != nil {
		t.Fatal(err)
	}
	r := &row{workload: "Gang 500Nodes", profile: "default", runs: []*run{{extra: x}}}
	var out bytes.Buffer
	printSummary(&out, []*row{r})
	want := "Gang 500Nodes              default      run 1 placement (upstream's built-in placement): 240 of 240 gangs whole, 0 split, 0 partly bound, 0 pods bound twice (1920 bindings); 180 gangs in small cliques, 60 in large; 2 small cliques with room left, 16 large cliques left empty"
	if !strings.Contains(out.String(), want) {
		t.Errorf("summary lacks\n%s\nin\n%s", want, out.String())
	}
}
