// Command report summarises a run of test/perf's BenchmarkPerfScheduling
// from the files it left in its -data-items-dir: scheduler_perf's
// BenchmarkPerfScheduling_benchmark_wasmsched_*.json (the newest) and
// extra.json. It prints one line per workload and profile with the
// throughput, one with opportunistic batching (how many attempts used the
// framework's node hint) and one with requeues (pods moved back to the
// active or backoff queue by cluster events); then for each workload the
// WASM/native ratios (throughput, requeues, attempt latency p99) and each
// profile's throughput against the default scheduler's. With -markdown,
// the tables of docs/benchmarks.md instead.
//
//	go run ./test/perf/report [-markdown] DIR
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// dataItems is scheduler_perf's result file.
type dataItems struct {
	DataItems []struct {
		Data   map[string]float64 `json:"data"`
		Unit   string             `json:"unit"`
		Labels map[string]string  `json:"labels"`
	} `json:"dataItems"`
}

// extra is test/perf's extra.json entry.
type extra struct {
	PeakRSS     int64 `json:"peakRSS"`
	Instances   int   `json:"instances"`
	GuestMemory int64 `json:"guestMemory"`
	NodesSent   int64 `json:"nodesSent"`
	UsageSent   int64 `json:"usageSent"`
	// UsageUnchanged: usage updates left unsent (2026-11-29 on).
	UsageUnchanged int64 `json:"usageUnchanged"`
	PodsSent       int64 `json:"podsSent"`
	// TenantUsageSent and ObjectsSent are context synced (issue 22).
	TenantUsageSent int64      `json:"tenantUsageSent"`
	ObjectsSent     int64      `json:"objectsSent"`
	Guest           guestTimes `json:"guest"`
	// GuestMeasured is Guest's part from the first measured pod on
	// (2026-11-29 on).
	GuestMeasured guestTimes `json:"guestMeasured"`
	// Counters are the scheduler's counters' changes by phase: "run" (the
	// whole workload) and "measured" (from its first measured pod on).
	Counters map[string]counters `json:"counters"`
	// Gang is the Gang workload's placement counters (gang_perf_test.go).
	Gang *gangCounts `json:"gang"`
}

// gangCounts are test/perf's counters of how a Gang workload placed its
// gangs.
type gangCounts struct {
	Gangs         int `json:"gangs"`
	Placed        int `json:"placed"`
	Partial       int `json:"partial"`
	Split         int `json:"split"`
	Bindings      int `json:"bindings"`
	BoundTwice    int `json:"boundTwice"`
	InSmall       int `json:"inSmall"`
	InLarge       int `json:"inLarge"`
	LargeFree     int `json:"largeFree"`
	SmallWithRoom int `json:"smallWithRoom"`
}

// placement describes a Gang workload's placement counters in one line;
// under default the placement is upstream's built-in one.
func (g gangCounts) placement(profile string) string {
	by := ""
	if profile == "default" {
		by = " (upstream's built-in placement)"
	}
	return fmt.Sprintf("placement%s: %d of %d gangs whole, %d split, %d partly bound, %d pods bound twice (%d bindings); %d gangs in small cliques, %d in large; %d small cliques with room left, %d large cliques left empty",
		by, g.Placed, g.Gangs, g.Split, g.Partial, g.BoundTwice, g.Bindings, g.InSmall, g.InLarge, g.SmallWithRoom, g.LargeFree)
}

// counters are the scheduler's counters test/perf records (counters_test.go).
type counters struct {
	// Batch: scheduler_batch_attempts_total by result.
	Batch map[string]float64 `json:"batch"`
	// Flushed: scheduler_batch_cache_flushed_total by reason.
	Flushed map[string]float64 `json:"flushed"`
	// Incoming: scheduler_queue_incoming_pods_total by "event queue".
	Incoming map[string]float64 `json:"incoming"`
	// Attempts: scheduler_schedule_attempts_total by result.
	Attempts map[string]float64 `json:"attempts"`
	// CPU is the benchmark process's CPU seconds (scheduler and API
	// server).
	CPU float64 `json:"cpuSeconds"`
}

// The events of scheduler_queue_incoming_pods_total that are not requeues:
// new pods, pods leaving the backoff queue, and pods that failed an attempt
// entering the unschedulable queue (into the backoff queue they are
// requeues: an event during the attempt may have helped).
var notRequeue = map[string]bool{"UnscheduledPodAdd": true, "BackoffComplete": true, "PopFromBackoffQ": true}

// queueing sums up one run's counters: batching from the whole run,
// requeues from its measured part when it has one.
type queueing struct {
	hintUsed, batchAttempts float64
	flushed                 map[string]float64 // by reason
	requeues                float64
	byEvent                 map[string]float64
	unschedulable           float64 // attempts that found no node
	phase                   string  // of the requeue counts: "run" or "measured"
	// cpuPerPod is the process's CPU milliseconds per scheduled pod in
	// that phase; 0 when not recorded.
	cpuPerPod float64
	// leftOut counts, in a mean over runs, the runs left out: they
	// recorded no measured part while others did.
	leftOut int
}

func (x extra) queueing() (queueing, bool) {
	run, ok := x.Counters["run"]
	if !ok {
		return queueing{}, false
	}
	q := queueing{hintUsed: run.Batch["hint_used"], flushed: run.Flushed, byEvent: map[string]float64{}, phase: "run"}
	for _, v := range run.Batch {
		q.batchAttempts += v
	}
	c := run
	if m, ok := x.Counters["measured"]; ok {
		c, q.phase = m, "measured"
	}
	for k, v := range c.Incoming {
		event, queue, _ := strings.Cut(k, " ")
		if notRequeue[event] || (event == "ScheduleAttemptFailure" && queue == "unschedulable") {
			continue
		}
		q.requeues += v
		q.byEvent[event] += v
	}
	q.unschedulable = c.Attempts["unschedulable"]
	if n := c.Attempts["scheduled"]; n > 0 {
		q.cpuPerPod = 1000 * c.CPU / n
	}
	return q, true
}

// events lists the requeues by event, most first: "AssignedPodDelete 812, ...".
func (q queueing) events() string { return mostFirst(q.byEvent) }

// mostFirst lists counts by name, most first: "a 812, b 3".
func mostFirst(m map[string]float64) string {
	names := make([]string, 0, len(m))
	for e := range m {
		names = append(names, e)
	}
	sort.Slice(names, func(i, j int) bool {
		if m[names[i]] != m[names[j]] {
			return m[names[i]] > m[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, e := range names {
		parts[i] = fmt.Sprintf("%s %.0f", e, m[e])
	}
	return strings.Join(parts, ", ")
}

// guestTimes are the calls of each export of the guest and the time they
// took.
type guestTimes map[string]struct {
	Calls int64   `json:"calls"`
	Ms    float64 `json:"ms"`
	MaxMs float64 `json:"maxMs"`
}

// String lists the time spent in each export, most first, with the
// longest call when known: "score_nodes 6012 calls 3.61 s (longest 2.1 ms), ...".
func (t guestTimes) String() string {
	names := make([]string, 0, len(t))
	for name := range t {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return t[names[i]].Ms > t[names[j]].Ms })
	parts := make([]string, len(names))
	for i, name := range names {
		g := t[name]
		parts[i] = fmt.Sprintf("%s %d calls %.2f s", name, g.Calls, g.Ms/1000)
		if g.MaxMs > 0 {
			parts[i] += fmt.Sprintf(" (longest %.1f ms)", g.MaxMs)
		}
	}
	return strings.Join(parts, ", ")
}

// row is one workload under one profile: the mean over its runs (rounds).
type row struct {
	workload, profile string
	runs              []*run
	throughput        map[string]float64 // Average, Perc50, Perc99 pods/s
	attempt           map[string]float64 // Perc50, Perc99 ms (scheduled)
	extra             extra              // peak RSS: the largest
	// queueing is the mean over the runs that recorded counters; hasQueueing
	// says whether any did.
	queueing    queueing
	hasQueueing bool
}

// run is one run of a workload under a profile.
type run struct {
	throughput, attempt map[string]float64
	extra               extra
}

// profileOrder is the order of the profiles in output.
var profileOrder = []string{"default", "native", "wasm-go", "wasm-tinygo"}

func main() {
	markdown := flag.Bool("markdown", false, "print the Markdown tables of docs/benchmarks.md")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: report [-markdown] DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	rows, err := load(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	if *markdown {
		printMarkdown(os.Stdout, rows)
	} else {
		printSummary(os.Stdout, rows)
	}
	printRatios(os.Stdout, rows, *markdown)
}

// printRatios prints one table of every workload's WASM/native ratios for
// both toolchains: throughput (each round's in brackets, runs paired by
// round), the process's CPU per scheduled pod over native's (above 1: the
// WASM profile spends more), guest linear memory per instance at the end,
// and peak RSS over native's.
func printRatios(w io.Writer, rows []*row, markdown bool) {
	names, by := workloads(rows)
	wasm := profileOrder[2:]
	cells := [][]string{{"workload"}}
	for _, p := range wasm {
		cells[0] = append(cells[0], p+" / native (rounds)", p+" CPU per pod / native", p+" guest MiB/instance", p+" RSS / native")
	}
	for _, name := range names {
		native := by[name]["native"]
		if native == nil || native.throughput["Average"] == 0 {
			continue
		}
		line := []string{name}
		any := false
		for _, p := range wasm {
			r := by[name][p]
			if r == nil || len(r.runs) == 0 {
				line = append(line, "-", "-", "-", "-")
				continue
			}
			any = true
			var rounds []string
			for i, rn := range r.runs {
				if i < len(native.runs) && native.runs[i].throughput["Average"] > 0 {
					rounds = append(rounds, fmt.Sprintf("%.2f", rn.throughput["Average"]/native.runs[i].throughput["Average"]))
				}
			}
			mem, rss, cpu := "-", "-", "-"
			if r.hasQueueing && native.hasQueueing && r.queueing.cpuPerPod > 0 && native.queueing.cpuPerPod > 0 && r.queueing.phase == native.queueing.phase {
				cpu = fmt.Sprintf("%.2f", r.queueing.cpuPerPod/native.queueing.cpuPerPod)
			}
			if r.extra.Instances > 0 {
				mem = fmt.Sprintf("%.1f", mib(r.extra.GuestMemory)/float64(r.extra.Instances))
			}
			if native.extra.PeakRSS > 0 {
				rss = fmt.Sprintf("%.2f", float64(r.extra.PeakRSS)/float64(native.extra.PeakRSS))
			}
			line = append(line, fmt.Sprintf("%.2f [%s]", r.throughput["Average"]/native.throughput["Average"], strings.Join(rounds, " ")), cpu, mem, rss)
		}
		if any {
			cells = append(cells, line)
		}
	}
	if len(cells) == 1 {
		return
	}
	fmt.Fprintln(w)
	if markdown {
		fmt.Fprintln(w, "### Ratios")
		fmt.Fprintln(w)
		for i, c := range cells {
			fmt.Fprintln(w, "| "+strings.Join(c, " | ")+" |")
			if i == 0 {
				fmt.Fprintln(w, "|---"+strings.Repeat("|---:", len(c)-1)+"|")
			}
		}
		return
	}
	fmt.Fprintln(w, "Ratios (throughput wasm/native, each round's in brackets; CPU per scheduled pod over native's; guest memory per instance; peak RSS over native's):")
	widths := make([]int, len(cells[0]))
	for _, c := range cells {
		for i, v := range c {
			widths[i] = max(widths[i], len(v))
		}
	}
	for _, c := range cells {
		var b strings.Builder
		for i, v := range c {
			fmt.Fprintf(&b, "%-*s  ", widths[i], v)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// load reads the results in dir: scheduler_perf's files and extra.json of
// one process, or, as test/perf/run.sh leaves them, one subdirectory per
// process (each run of a workload under a profile).
func load(dir string) ([]*row, error) {
	c := &collector{byKey: map[string]*row{}, runs: map[string]*run{}}
	found, err := c.add(dir, "")
	if err != nil {
		return nil, err
	}
	if !found {
		subdirs, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, d := range subdirs {
			if !d.IsDir() {
				continue
			}
			ok, err := c.add(filepath.Join(dir, d.Name()), d.Name()+"/")
			if err != nil {
				return nil, err
			}
			found = found || ok
		}
	}
	if !found {
		return nil, fmt.Errorf("%s holds no BenchmarkPerfScheduling_benchmark_wasmsched_*.json, nor do its subdirectories: did the benchmark run with -data-items-dir=%s?", dir, dir)
	}
	return c.rows(), nil
}

// collector gathers runs into rows, one row per workload and profile.
type collector struct {
	byKey  map[string]*row
	runs   map[string]*run
	sorted []*row
}

// add reads the results of one process in dir, if it holds any; prefix
// tells its runs from other processes' runs of the same name.
func (c *collector) add(dir, prefix string) (bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "BenchmarkPerfScheduling_benchmark_wasmsched_*.json"))
	if err != nil || len(files) == 0 {
		return false, err
	}
	sort.Strings(files) // the name ends with the date and time
	data, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		return false, err
	}
	var items dataItems
	if err := json.Unmarshal(data, &items); err != nil {
		return false, fmt.Errorf("%s: %w", files[len(files)-1], err)
	}
	extras := map[string]extra{}
	if data, err := os.ReadFile(filepath.Join(dir, "extra.json")); err == nil {
		if err := json.Unmarshal(data, &extras); err != nil {
			return false, fmt.Errorf("%s: %w", filepath.Join(dir, "extra.json"), err)
		}
	}
	for _, it := range items.DataItems {
		// Name is BenchmarkPerfScheduling/<Workload>_<profile>[_<round>]/<size>/<namespace>.
		parts := strings.Split(it.Labels["Name"], "/")
		if len(parts) < 3 {
			continue
		}
		group, rest, ok := strings.Cut(parts[1], "_")
		if !ok {
			continue
		}
		prof, _, _ := strings.Cut(rest, "_")
		key := group + "/" + parts[2] + "/" + prof
		r := c.byKey[key]
		if r == nil {
			r = &row{workload: group + " " + parts[2], profile: prof}
			c.byKey[key] = r
			c.sorted = append(c.sorted, r)
		}
		runKey := parts[1] + "/" + parts[2]
		rn := c.runs[prefix+runKey]
		if rn == nil {
			rn = &run{extra: extras[parts[0]+"/"+runKey]}
			c.runs[prefix+runKey] = rn
			r.runs = append(r.runs, rn)
		}
		switch it.Labels["Metric"] {
		case "SchedulingThroughput":
			rn.throughput = it.Data
		case "scheduler_scheduling_attempt_duration_seconds":
			if it.Labels["result"] == "scheduled" {
				rn.attempt = it.Data
			}
		}
	}
	return true, nil
}

// rows averages the runs of each row and sorts the rows by workload and
// profile.
func (c *collector) rows() []*row {
	rows := c.sorted
	for _, r := range rows {
		r.throughput = mean(r.runs, func(rn *run) map[string]float64 { return rn.throughput })
		r.attempt = mean(r.runs, func(rn *run) map[string]float64 { return rn.attempt })
		r.queueing, r.hasQueueing = meanQueueing(r.runs)
		for _, rn := range r.runs {
			r.extra.PeakRSS = max(r.extra.PeakRSS, rn.extra.PeakRSS)
			if rn.extra.Instances > 0 {
				rss := r.extra.PeakRSS
				r.extra = rn.extra
				r.extra.PeakRSS = rss
			}
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].workload != rows[j].workload {
			return rows[i].workload < rows[j].workload
		}
		return slices.Index(profileOrder, rows[i].profile) < slices.Index(profileOrder, rows[j].profile)
	})
	return rows
}

// meanQueueing averages the queueing of the runs that recorded counters;
// when some recorded their measured part, of those only: a whole run's
// requeues and CPU per pod are not the measured part's.
func meanQueueing(runs []*run) (queueing, bool) {
	out := queueing{byEvent: map[string]float64{}, flushed: map[string]float64{}}
	qs, leftOut := averaged(runs)
	out.leftOut = leftOut
	for _, q := range qs {
		out.hintUsed += q.hintUsed
		out.batchAttempts += q.batchAttempts
		out.requeues += q.requeues
		out.unschedulable += q.unschedulable
		out.cpuPerPod += q.cpuPerPod
		out.phase = q.phase
		for e, v := range q.byEvent {
			out.byEvent[e] += v
		}
		for e, v := range q.flushed {
			out.flushed[e] += v
		}
	}
	if len(qs) == 0 {
		return out, false
	}
	f := 1 / float64(len(qs))
	out.hintUsed, out.batchAttempts, out.requeues, out.unschedulable = out.hintUsed*f, out.batchAttempts*f, out.requeues*f, out.unschedulable*f
	out.cpuPerPod *= f
	for e := range out.byEvent {
		out.byEvent[e] *= f
	}
	for e := range out.flushed {
		out.flushed[e] *= f
	}
	return out, true
}

// mean averages each value of the runs' data.
func mean(runs []*run, data func(*run) map[string]float64) map[string]float64 {
	out := map[string]float64{}
	n := map[string]int{}
	for _, rn := range runs {
		for k, v := range data(rn) {
			out[k] += v
			n[k]++
		}
	}
	for k := range out {
		out[k] /= float64(n[k])
	}
	return out
}

// workloads returns the workloads in order and their rows by profile.
func workloads(rows []*row) ([]string, map[string]map[string]*row) {
	var names []string
	by := map[string]map[string]*row{}
	for _, r := range rows {
		if by[r.workload] == nil {
			names = append(names, r.workload)
			by[r.workload] = map[string]*row{}
		}
		by[r.workload][r.profile] = r
	}
	return names, by
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func printSummary(w io.Writer, rows []*row) {
	names, by := workloads(rows)
	for _, r := range rows {
		fmt.Fprintf(w, "%-26s %-12s %8.1f pods/s  (p50 %6.1f, p99 %6.1f)  attempt p50 %7.2f ms p99 %7.2f ms  peak RSS %6.0f MiB%s\n",
			r.workload, r.profile, r.throughput["Average"], r.throughput["Perc50"], r.throughput["Perc99"],
			r.attempt["Perc50"], r.attempt["Perc99"], mib(r.extra.PeakRSS), perRun(r))
	}
	for _, r := range rows {
		if !r.hasQueueing {
			continue
		}
		q := r.queueing
		flushed := ""
		if len(q.flushed) > 0 {
			flushed = " (cache flushed: " + mostFirst(q.flushed) + ")"
		}
		if q.leftOut > 0 {
			fmt.Fprintf(w, "%-26s %-12s %d of %d runs recorded no measured part (its first measured pod was not seen): left out of the batching, requeues and CPU below\n",
				r.workload, r.profile, q.leftOut, len(r.runs))
		}
		fmt.Fprintf(w, "%-26s %-12s batching: %.0f of %.0f attempts used a hint%s\n", r.workload, r.profile, q.hintUsed, q.batchAttempts, flushed)
		fmt.Fprintf(w, "%-26s %-12s requeues: %.0f (%s part; %.0f unschedulable attempts)%s\n", r.workload, r.profile,
			q.requeues, q.phase, q.unschedulable, parenthesised(q.events()))
		if q.cpuPerPod > 0 {
			fmt.Fprintf(w, "%-26s %-12s CPU: %.2f ms per scheduled pod (%s part; scheduler and API server)%s\n", r.workload, r.profile, q.cpuPerPod, q.phase, cpuPerRun(r))
		}
	}
	for _, r := range rows {
		for i, rn := range r.runs {
			if g := rn.extra.Gang; g != nil {
				fmt.Fprintf(w, "%-26s %-12s run %d %s\n", r.workload, r.profile, i+1, g.placement(r.profile))
			}
		}
	}
	for _, name := range names {
		prefix := ""
		if len(names) > 1 {
			prefix = name + ": "
		}
		native := by[name]["native"]
		for _, p := range profileOrder[2:] {
			wasm := by[name][p]
			if native == nil || wasm == nil || native.throughput["Average"] == 0 {
				continue
			}
			label := "wasm/native"
			if p != "wasm-go" {
				label = strings.TrimPrefix(p, "wasm-") + " wasm/native"
			}
			fmt.Fprintf(w, "%s%s throughput ratio: %.2f\n", prefix, label, wasm.throughput["Average"]/native.throughput["Average"])
			var more []string
			if wasm.hasQueueing && native.hasQueueing {
				more = append(more, fmt.Sprintf("requeues %.0f vs %.0f%s", wasm.queueing.requeues, native.queueing.requeues, ratio(wasm.queueing.requeues, native.queueing.requeues)))
			}
			if native.attempt["Perc99"] > 0 {
				more = append(more, fmt.Sprintf("attempt p99 %.2f", wasm.attempt["Perc99"]/native.attempt["Perc99"]))
			}
			if wasm.queueing.cpuPerPod > 0 && native.queueing.cpuPerPod > 0 && wasm.queueing.phase == native.queueing.phase {
				more = append(more, fmt.Sprintf("CPU per pod %.2f", wasm.queueing.cpuPerPod/native.queueing.cpuPerPod))
			}
			if len(more) > 0 {
				fmt.Fprintf(w, "%s%s %s\n", prefix, label, strings.Join(more, ", "))
			}
		}
		if def := by[name]["default"]; def != nil && def.throughput["Average"] > 0 {
			var parts []string
			for _, p := range profileOrder[1:] {
				if r := by[name][p]; r != nil {
					parts = append(parts, fmt.Sprintf("%s %.2f", p, r.throughput["Average"]/def.throughput["Average"]))
				}
			}
			if len(parts) > 0 {
				fmt.Fprintf(w, "%sthroughput vs default: %s\n", prefix, strings.Join(parts, ", "))
			}
		}
	}
}

// averaged returns the queueing of the runs a mean over runs counts: those
// that recorded counters and, when some recorded their measured part, of
// those only; leftOut is how many recorded the whole run only.
func averaged(runs []*run) (qs []queueing, leftOut int) {
	measured := false
	for _, rn := range runs {
		if q, ok := rn.extra.queueing(); ok {
			qs = append(qs, q)
			measured = measured || q.phase == "measured"
		}
	}
	if !measured {
		return qs, 0
	}
	kept := qs[:0]
	for _, q := range qs {
		if q.phase == "measured" {
			kept = append(kept, q)
		}
	}
	return kept, len(qs) - len(kept)
}

// cpuPerRun lists each run's CPU ms per scheduled pod: "  runs: 9.80, 10.40"
// (of the runs meanQueueing averages).
func cpuPerRun(r *row) string {
	var vs []string
	qs, _ := averaged(r.runs)
	for _, q := range qs {
		if q.cpuPerPod > 0 {
			vs = append(vs, fmt.Sprintf("%.2f", q.cpuPerPod))
		}
	}
	return runsList(vs)
}

// ratio is " (a/b x)" when b is not zero.
func ratio(a, b float64) string {
	if b == 0 {
		return ""
	}
	return fmt.Sprintf(" (%.2fx)", a/b)
}

func parenthesised(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// perRun lists the throughput of each run when there were several.
func perRun(r *row) string {
	var vs []string
	for _, rn := range r.runs {
		vs = append(vs, fmt.Sprintf("%.1f", rn.throughput["Average"]))
	}
	return runsList(vs)
}

// runsList is "  runs: a, b, ..." for two values or more, "" for fewer.
func runsList(vs []string) string {
	if len(vs) < 2 {
		return ""
	}
	return "  runs: " + strings.Join(vs, ", ")
}

func printMarkdown(w io.Writer, rows []*row) {
	names, by := workloads(rows)
	for _, name := range names {
		fmt.Fprintf(w, "### %s\n\n", name)
		fmt.Fprintln(w, "| profile | pods/s avg | p50 | p99 | attempt p50 (ms) | attempt p99 (ms) | peak RSS (MiB) | vs native | vs default | attempt p99 vs native | batching: hint used / attempts | requeues | runs (pods/s) |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
		native, def := by[name]["native"], by[name]["default"]
		for _, p := range profileOrder {
			r := by[name][p]
			if r == nil {
				continue
			}
			vsNative, vsDefault, p99 := "-", "-", "-"
			if native != nil && native.throughput["Average"] > 0 {
				vsNative = fmt.Sprintf("%.2f", r.throughput["Average"]/native.throughput["Average"])
			}
			if def != nil && def.throughput["Average"] > 0 {
				vsDefault = fmt.Sprintf("%.2f", r.throughput["Average"]/def.throughput["Average"])
			}
			if native != nil && native.attempt["Perc99"] > 0 {
				p99 = fmt.Sprintf("%.2f", r.attempt["Perc99"]/native.attempt["Perc99"])
			}
			batching, requeues := "-", "-"
			if r.hasQueueing {
				batching = fmt.Sprintf("%.0f / %.0f", r.queueing.hintUsed, r.queueing.batchAttempts)
				requeues = fmt.Sprintf("%.0f", r.queueing.requeues)
			}
			fmt.Fprintf(w, "| %s | %.1f | %.1f | %.1f | %.2f | %.2f | %.0f | %s | %s | %s | %s | %s | %s |\n", p,
				r.throughput["Average"], r.throughput["Perc50"], r.throughput["Perc99"],
				r.attempt["Perc50"], r.attempt["Perc99"], mib(r.extra.PeakRSS), vsNative, vsDefault, p99, batching, requeues,
				strings.TrimPrefix(perRun(r), "  runs: "))
		}
		for _, p := range profileOrder {
			if r := by[name][p]; r != nil && r.hasQueueing && r.queueing.requeues > 0 {
				fmt.Fprintf(w, "\n%s requeues (%s part) by event: %s; %.0f unschedulable attempts.\n", p, r.queueing.phase, r.queueing.events(), r.queueing.unschedulable)
			}
		}
		for _, p := range profileOrder {
			if r := by[name][p]; r != nil {
				for i, rn := range r.runs {
					if g := rn.extra.Gang; g != nil {
						fmt.Fprintf(w, "\n%s run %d %s.\n", p, i+1, g.placement(p))
					}
				}
			}
		}
		for _, p := range profileOrder[2:] {
			if r := by[name][p]; r != nil && r.extra.Instances > 0 {
				fmt.Fprintf(w, "\n%s: %d instances at the end, %.0f MiB of guest linear memory in all; %d nodes sent whole, %d usage updates (%d more left unsent: unchanged), %d pods sent.\n",
					p, r.extra.Instances, mib(r.extra.GuestMemory), r.extra.NodesSent, r.extra.UsageSent, r.extra.UsageUnchanged, r.extra.PodsSent)
				if r.extra.TenantUsageSent > 0 || r.extra.ObjectsSent > 0 {
					fmt.Fprintf(w, "Context synced: %d tenant usage entries, %d cluster objects.\n", r.extra.TenantUsageSent, r.extra.ObjectsSent)
				}
				if len(r.extra.Guest) > 0 {
					fmt.Fprintf(w, "Time in the guest's exports (last run): %s.\n", r.extra.Guest)
					if len(r.extra.GuestMeasured) > 0 {
						fmt.Fprintf(w, "Of it from the first measured pod on: %s.\n", r.extra.GuestMeasured)
					}
				}
			}
		}
		fmt.Fprintln(w)
	}
}
