package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	_ "image/jpeg"
	"image/png"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/host/explain"
	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/demo"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// chromium returns Debian's Chromium, installing it with apt-get when it
// is missing and the test runs as root (as make tinygo installs its
// toolchain's packages); otherwise the test fails saying how to install it.
func chromium(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Geteuid() != 0 {
		t.Fatal("the browser test needs Debian's chromium: run `make chromium` as root (apt-get install chromium)")
	}
	unlock := testwasm.Lock(t, filepath.Join(testwasm.SharedDir(t), "chromium.lock"))
	defer unlock()
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	for _, args := range [][]string{{"update"}, {"install", "-y", "--no-install-recommends", "chromium"}} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// browser starts headless Chromium with the flags this kind of machine
// needs (no sandbox as root, nothing fetched in the background).
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	return ctx
}

// The page, in a real browser, on the demo: pending pods first, the gpu
// policy's reason for train-h100, a total score for every feasible node of
// a placed pod, the view following the pod chosen, a what-if that moves
// pending pods, markup from a guest shown as text, and a screenshot.
func testUI(t *testing.T, ec *explainCluster) {
	c, err := connect(ec.kubeconfig, demo.PolicyNamespace)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var served bytes.Buffer
	go func() {
		done <- serveUI(sctx, ln, &explain.Client{Kube: c.client, Dynamic: c.dyn, Namespace: demo.PolicyNamespace}, &served)
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("ui: %v", err)
		}
		if !strings.Contains(served.String(), "serving http://127.0.0.1:") {
			t.Errorf("ui printed %q", served.String())
		}
	}()
	url := "http://" + ln.Addr().String() + "/"

	// Another host name is refused (DNS rebinding).
	req, _ := http.NewRequest("GET", url+"api/pods", nil)
	req.Host = "attacker.example:80"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("request for another host: %v %v", resp, err)
	}

	// The feasible nodes of web-1 by the CLI, to compare.
	code, out, errs := ec.explainCLI("demo/web-1", "-o", "json", "--limit", "0")
	if code != 0 {
		t.Fatalf("explain: %s", errs)
	}
	var web1 explain.Result
	if err := json.Unmarshal([]byte(out), &web1); err != nil {
		t.Fatal(err)
	}
	var feasible []string
	for _, n := range web1.Nodes {
		if n.Code == "Success" {
			feasible = append(feasible, n.Name)
		}
	}
	slices.Sort(feasible)

	ctx := browser(t)
	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// choose clicks a pod (or the what-if's button) and waits until the
	// page shows the answer for marker, failing on an error shown.
	choose := func(click, marker string) {
		t.Helper()
		do(chromedp.Click(click), chromedp.WaitReady(`body[data-explained="`+marker+`"]`))
		if msg := evalJS[string](t, ctx, `document.getElementById('error').hidden ? '' : document.getElementById('error').textContent`); msg != "" {
			t.Fatalf("%s: the page shows an error: %s", marker, msg)
		}
	}

	do(chromedp.Navigate(url), chromedp.WaitVisible(`#pods button[data-pod="demo/train-h100"]`))
	if first := text(`#pods li:first-child .state`); first != "Pending" {
		t.Errorf("first pod listed is %q, want a Pending one", first)
	}
	choose(`#pods button[data-pod="demo/train-h100"]`, "demo/train-h100")
	if h100 := text(`#table tbody`); !strings.Contains(h100, "gpu: wrong GPU product: want NVIDIA-H100-80GB-HBM3") {
		t.Errorf("train-h100's table lacks the gpu policy's reason:\n%s", h100)
	}

	choose(`#pods button[data-pod="demo/web-1"]`, "demo/web-1")
	t.Logf("page: %s", evalJS[string](t, ctx, `(() => { const n = performance.getEntriesByType('navigation')[0];
		const r = performance.getEntriesByType('resource').filter(e => e.name.includes('/api/explain')).pop();
		return 'document loaded in ' + n.duration.toFixed(0) + ' ms (' + n.transferSize + ' bytes, scripts and styles ' +
			performance.getEntriesByType('resource').filter(e => /app\.(js|css)$/.test(e.name)).reduce((a, e) => a + e.transferSize, 0) +
			' bytes); last explain answer ' + r.duration.toFixed(0) + ' ms, ' + r.transferSize + ' bytes'; })()`))
	if title := text(`#pod-title`); title != "demo/web-1" {
		t.Errorf("after choosing web-1 the page shows %q", title)
	}
	totals := evalJS[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll('#table tbody tr[data-node]')]
		.filter(r => r.querySelector('.verdict').textContent === 'Success')
		.map(r => [r.dataset.node, r.querySelector('.total').textContent]))`)
	var shown []string
	for n, v := range totals {
		shown = append(shown, n)
		if v == "" || strings.Trim(v, "0123456789") != "" {
			t.Errorf("feasible node %s has total %q, want a score", n, v)
		}
	}
	slices.Sort(shown)
	if !slices.Equal(shown, feasible) || len(feasible) < 2 {
		t.Errorf("page scores nodes %v, the CLI finds %v feasible", shown, feasible)
	}

	// The screenshot the README shows: web-1 with its chosen node's panel
	// open.
	do(chromedp.Click(`#table tbody tr.chosen`), chromedp.WaitVisible(`#panel h3`))
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(90))
	if err != nil {
		t.Fatal(err)
	}
	checkScreenshot(t, shot)

	// What if gpu ran the probe module (which lets every pod through):
	// the pods gpu holds pending would move.
	probe, err := os.ReadFile(testwasm.Path(t, "test/guests/probe"))
	if err != nil {
		t.Fatal(err)
	}
	do(chromedp.Click(`#whatif-box summary`),
		chromedp.WaitReady(`#w-policy option[value="gpu"]`),
		chromedp.SetValue(`#w-policy`, "gpu"),
		chromedp.SendKeys(`#w-digest`, source.Digest(probe)),
		chromedp.SendKeys(`#w-settings`, `{}`))
	choose(`#w-run`, "demo/web-1|gpu="+source.Digest(probe))
	moves := text(`#whatif`)
	for _, want := range []string{"demo/train-h100", "demo/train-huge", "pending pods of the profile would change"} {
		if !strings.Contains(moves, want) {
			t.Errorf("what-if lacks %q:\n%s", want, moves)
		}
	}

	// Markup in a guest's reason (and so in the scheduler's message) is
	// shown as text and never runs.
	choose(`#w-clear`, "demo/web-1")
	choose(`#pods button[data-pod="demo/hostile-pod"]`, "demo/hostile-pod")
	// The row is clicked from script: a click at coordinates can miss it
	// while the page still lays out on a busy machine.
	first := evalJS[string](t, ctx, `(() => { const r = document.querySelector('#table tbody tr[data-node]'); r.click(); return r.dataset.node; })()`)
	do(chromedp.WaitVisible(`#panel h3`))
	if h := text(`#panel h3`); h != first {
		t.Errorf("the panel shows node %q, not %q clicked", h, first)
	}
	if n := evalJS[int](t, ctx, `document.querySelectorAll('img, script:not([src])').length`); n != 0 {
		t.Errorf("a guest's markup became %d elements", n)
	}
	if evalJS[bool](t, ctx, `window.__pwned !== undefined`) {
		t.Error("a guest's markup ran")
	}
	for what, sel := range map[string]string{"table": `#table tbody`, "panel": `#panel-body`, "pod list": `#pods button[data-pod="demo/hostile-pod"]`} {
		if got := text(sel); !strings.Contains(got, hostileReason) {
			t.Errorf("%s does not show the hostile reason as text:\n%s", what, got)
		}
	}

	// A pod of the static profile: its policies as the scheduler
	// publishes them, their sources, and their reasons.
	choose(`#pods button[data-pod="demo/space-1"]`, "demo/space-1")
	if prof := text(`#fact-profile`); !strings.Contains(prof, "static (static policies, as replica ") || !strings.Contains(prof, "configMap edge") {
		t.Errorf("space-1's profile: %s", prof)
	}
	if tbl := text(`#table tbody`); !strings.Contains(tbl, "nodepin: node is not one of the allowed nodes") || !strings.Contains(tbl, "edge: not an edge node") {
		t.Errorf("space-1's table lacks nodepin's and edge's reasons:\n%s", tbl)
	}
}

// evalJS evaluates a JavaScript expression in the page.
func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// checkScreenshot checks the screenshot is a real rendering (large, many
// colours) and writes it where the README shows it when
// WASMSCHED_UPDATE_DOCS=1.
func checkScreenshot(t *testing.T, shot []byte) {
	t.Helper()
	img, format, err := image.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	b := img.Bounds()
	colours := map[[3]uint32]bool{}
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[[3]uint32{r >> 10, g >> 10, bl >> 10}] = true
		}
	}
	t.Logf("screenshot: %s %dx%d, %d bytes, %d colours sampled", format, b.Dx(), b.Dy(), len(shot), len(colours))
	if b.Dx() < 1200 || b.Dy() < 700 || len(shot) < 40<<10 || len(colours) < 30 {
		t.Errorf("screenshot %dx%d, %d bytes, %d colours: not a rendered page", b.Dx(), b.Dy(), len(shot), len(colours))
	}
	if os.Getenv("WASMSCHED_UPDATE_DOCS") == "1" {
		path := filepath.Join(testwasm.Root(t), "docs", "images", "ui.jpg")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

var _ = png.Decode // PNG decoder registered for image.Decode

// manyNodes is how many nodes testUIManyNodes adds to the demo's six:
// 400, or $WASMSCHED_UI_NODES (for a one-off measurement at scale).
func manyNodes(t *testing.T) int {
	if v := os.Getenv("WASMSCHED_UI_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 130 || n > 7000 {
			t.Fatalf("WASMSCHED_UI_NODES=%q: want 130..7000 (the heat map draws 2000 nodes a zone)", v)
		}
		return n
	}
	return 400
}

// hostileLabel is markup where the page shows a label: the API server
// refuses it as a label's value (or key), so the test types it as the
// label to group by.
const hostileLabel = `<img src=x onerror="window.__pwned=3">`

// testUIManyNodes adds manyNodes nodes in four zones and five pools and
// checks, in the browser, that the page stays readable: the heat map
// grouped by zone and then by pool, the table paged, sorted and searched;
// markup given as the label to group by shown as text; and that a server
// bounded below the cluster's size says so rather than show part of it.
func testUIManyNodes(t *testing.T, ec *explainCluster) {
	ctx := context.Background()
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("32Gi"), v1.ResourcePods: resource.MustParse("110")}
	bad := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hostile", Labels: map[string]string{"pool": hostileLabel}}}
	if _, err := ec.client.CoreV1().Nodes().Create(ctx, bad, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "Invalid value") {
		t.Fatalf("a node labelled with markup: %v, want the API server's refusal", err)
	}
	many := manyNodes(t)
	// The failing profile's pods are done with: without them the
	// scheduler does not retry a trap, a loop and an OOM across every new
	// node while the test runs.
	zero := int64(0)
	for _, f := range []string{"trap", "loop", "oom"} {
		if err := ec.client.CoreV1().Pods(demo.Namespace).Delete(ctx, f+"-pod", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range many {
		pool := fmt.Sprintf("p%d", i%5)
		name := fmt.Sprintf("m-%04d", i)
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name,
			"topology.kubernetes.io/zone": fmt.Sprintf("zone-%c", 'a'+i%4), "pool": pool}},
			Status: v1.NodeStatus{Capacity: alloc.DeepCopy(), Allocatable: alloc,
				Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady"}}}}
		if _, err := ec.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	total := many + 6
	start := time.Now()
	if code, _, errs := ec.explainCLI("demo/web-1", "-o", "json"); code != 0 {
		t.Fatalf("explain at %d nodes: %s", total, errs)
	}
	t.Logf("wasmsched explain demo/web-1 at %d nodes: %v (listing, fetching and compiling from the cache, evaluating)", total, time.Since(start).Round(time.Millisecond))

	c, err := connect(ec.kubeconfig, demo.PolicyNamespace)
	if err != nil {
		t.Fatal(err)
	}
	url := startUI(t, &explain.Client{Kube: c.client, Dynamic: c.dyn, Namespace: demo.PolicyNamespace})
	ctx = browser(t)
	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	do(chromedp.Navigate(url), chromedp.WaitVisible(`#pods button[data-pod="demo/web-1"]`),
		chromedp.Click(`#pods button[data-pod="demo/web-1"]`), chromedp.WaitReady(`body[data-explained="demo/web-1"]`))
	if msg := evalJS[string](t, ctx, `document.getElementById('error').hidden ? '' : document.getElementById('error').textContent`); msg != "" {
		t.Fatalf("the page shows an error: %s", msg)
	}
	t.Logf("%d nodes: %s", total, evalJS[string](t, ctx, `(() => { const n = performance.getEntriesByType('navigation')[0];
		const r = performance.getEntriesByType('resource').filter(e => e.name.includes('/api/explain')).pop();
		return 'document loaded in ' + n.duration.toFixed(0) + ' ms; explain answer ' + r.duration.toFixed(0) + ' ms, ' + r.transferSize + ' bytes (' + r.decodedBodySize + ' decoded)'; })()`))

	// Grouped by zone: four zones, every node drawn once.
	groups := evalJS[[]string](t, ctx, `[...document.querySelectorAll('#heatmap .group')].map(g => g.dataset.group)`)
	if !slices.Equal(groups, []string{"zone-a", "zone-b", "zone-c", "zone-d"}) {
		t.Errorf("heat map groups %v, want the four zones", groups)
	}
	if n := evalJS[int](t, ctx, `document.querySelectorAll('#heatmap .cell').length`); n != total {
		t.Errorf("heat map draws %d cells, want %d", n, total)
	}
	// The table is paged: 100 rows at a time.
	if got := text(`#page-info`); got != fmt.Sprintf("nodes 1–100 of %d", total) {
		t.Errorf("page info %q", got)
	}
	if first := text(`#table tbody tr[data-node]:first-child td:first-child`); first != evalJS[string](t, ctx, `document.querySelector('#table tbody tr.chosen td').textContent`) {
		t.Errorf("sorted by score, the first row is %q, not the chosen node", first)
	}
	do(chromedp.Click(`#next-page`))
	if got := text(`#page-info`); got != fmt.Sprintf("nodes 101–200 of %d", total) {
		t.Errorf("next page: page info %q", got)
	}
	// Sorted by name.
	do(chromedp.SetValue(`#c-sort`, "name"), chromedp.Evaluate[chromedp.Void](`document.getElementById('c-sort').dispatchEvent(new Event('change'))`))
	if rows := evalJS[[]string](t, ctx, `[...document.querySelectorAll('#table tbody tr[data-node]')].slice(0, 3).map(r => r.dataset.node)`); !slices.Equal(rows, []string{"a-cpu-1", "a-gpu-1", "b-cpu-1"}) {
		t.Errorf("sorted by name, the table starts %v", rows)
	}
	// A search keeps the matching nodes in the table and dims the rest of
	// the heat map.
	do(chromedp.SendKeys(`#c-search`, "m-012"))
	if rows := evalJS[int](t, ctx, `document.querySelectorAll('#table tbody tr[data-node]').length`); rows != 10 {
		t.Errorf("search m-012: %d rows, want 10", rows)
	}
	if lit := evalJS[int](t, ctx, `document.querySelectorAll('#heatmap .cell:not(.dim)').length`); lit != 10 {
		t.Errorf("search m-012: %d cells not dimmed, want 10", lit)
	}
	// Grouped by pool (the six demo nodes have none).
	group := func(label string) {
		t.Helper()
		do(chromedp.Evaluate[chromedp.Void](`document.getElementById('c-search').value = ''`),
			chromedp.SetValue(`#c-group`, label),
			chromedp.Evaluate[chromedp.Void](`document.body.removeAttribute('data-explained'); document.getElementById('c-group').dispatchEvent(new Event('change'))`),
			chromedp.WaitReady(`body[data-explained="demo/web-1"]`))
	}
	group("pool")
	groups = evalJS[[]string](t, ctx, `[...document.querySelectorAll('#heatmap .group')].map(g => g.dataset.group)`)
	if !slices.Equal(groups, []string{"(no pool)", "p0", "p1", "p2", "p3", "p4"}) {
		t.Errorf("grouped by pool: %q", groups)
	}
	// Markup as the label to group by is shown as text and never runs.
	group(hostileLabel)
	if hm, head := text(`#heatmap`), text(`#table thead`); !strings.Contains(hm, "(no "+hostileLabel+")") || !strings.Contains(head, hostileLabel) {
		t.Errorf("the heat map or the table does not show the label as text:\n%s\n%s\nerror: %s", hm, head,
			evalJS[string](t, ctx, `document.getElementById('error').hidden ? '' : document.getElementById('error').textContent`))
	}
	if n := evalJS[int](t, ctx, `document.querySelectorAll('img').length`); n != 0 || evalJS[bool](t, ctx, `window.__pwned !== undefined`) {
		t.Errorf("a label's markup became %d elements or ran", n)
	}

	// A cluster larger than the server's bound: refused, saying so.
	small := startUI(t, &explain.Client{Kube: c.client, Dynamic: c.dyn, Namespace: demo.PolicyNamespace, MaxNodes: 100})
	do(chromedp.Navigate(small), chromedp.WaitVisible(`#error`))
	if msg := text(`#error`); !strings.Contains(msg, "the cluster has more than 100 nodes, more than explain evaluates at once") {
		t.Errorf("bounded server: the page shows %q", msg)
	}
}

// startUI serves the page for x on a free loopback port until the test
// ends, and returns its address.
func startUI(t *testing.T, x *explain.Client) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveUI(sctx, ln, x, io.Discard) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("ui: %v", err)
		}
	})
	return "http://" + ln.Addr().String() + "/"
}
