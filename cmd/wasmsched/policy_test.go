package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/lifecycle"
	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// policyCluster is a control plane with the SchedulingPolicy CRD, the
// scheduler's namespace and a kubeconfig. No scheduler runs: tests write
// the status a scheduler would write by hand.
type policyCluster struct {
	t          *testing.T
	client     kubernetes.Interface
	dyn        dynamic.Interface
	kubeconfig string
}

func policyEnv(t *testing.T) *policyCluster {
	t.Helper()
	client, kubeconfig := pushEnv(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	if err := api.Install(context.Background(), dyn); err != nil {
		t.Fatal(err)
	}
	return &policyCluster{t: t, client: client, dyn: dyn, kubeconfig: kubeconfig}
}

// cli runs wasmsched with --kubeconfig appended.
func (pc *policyCluster) cli(args ...string) (int, string, string) {
	return runCLI(append(args, "--kubeconfig", pc.kubeconfig)...)
}

// ok runs wasmsched and fails the test unless it succeeds.
func (pc *policyCluster) ok(args ...string) string {
	pc.t.Helper()
	code, out, errs := pc.cli(args...)
	if code != 0 {
		pc.t.Fatalf("wasmsched %s: exit %d: %s%s", strings.Join(args, " "), code, errs, out)
	}
	return out
}

// fails runs wasmsched, requires exit 1 and an error containing each of
// want, and returns stdout.
func (pc *policyCluster) fails(args []string, want ...string) string {
	pc.t.Helper()
	code, out, errs := pc.cli(args...)
	if code != 1 {
		pc.t.Fatalf("wasmsched %s: exit %d, want 1; stdout %s stderr %s", strings.Join(args, " "), code, out, errs)
	}
	for _, w := range want {
		if !strings.Contains(errs, w) {
			pc.t.Errorf("wasmsched %s: stderr %q lacks %q", strings.Join(args, " "), errs, w)
		}
	}
	return out
}

func (pc *policyCluster) get(name string) *api.SchedulingPolicy {
	pc.t.Helper()
	u, err := pc.dyn.Resource(api.GVR).Namespace(defaultNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		pc.t.Fatal(err)
	}
	sp, err := api.FromUnstructured(u)
	if err != nil {
		pc.t.Fatal(err)
	}
	return sp
}

// setStatus writes what a scheduler would.
func (pc *policyCluster) setStatus(name string, change func(sp *api.SchedulingPolicy)) {
	pc.t.Helper()
	sp := pc.get(name)
	change(sp)
	u, err := api.ToUnstructured(sp)
	if err != nil {
		pc.t.Fatal(err)
	}
	if _, err := pc.dyn.Resource(api.GVR).Namespace(defaultNamespace).UpdateStatus(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		pc.t.Fatal(err)
	}
}

// chunks lists the content-addressed chunk ConfigMaps, sorted.
func (pc *policyCluster) chunks() []string {
	pc.t.Helper()
	list, err := pc.client.CoreV1().ConfigMaps(defaultNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: source.LabelModule})
	if err != nil {
		pc.t.Fatal(err)
	}
	var names []string
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	sort.Strings(names)
	return names
}

// chunkLines is the output of a push for a module's chunks.
func chunkLines(t *testing.T, module []byte, verb string) string {
	t.Helper()
	cms, err := source.PackModule(defaultNamespace, module)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, cm := range cms {
		fmt.Fprintf(&b, "configmap/%s %s\n", cm.Name, verb)
	}
	return b.String()
}

func summary(name string, module []byte) string {
	n := len(mustPack(module))
	return fmt.Sprintf("policy %s: sha256 %s, %d bytes in %d ConfigMap(s) in namespace %s\n", name, source.Digest(module), len(module), n, defaultNamespace)
}

func mustPack(module []byte) []*v1.ConfigMap {
	cms, err := source.PackModule(defaultNamespace, module)
	if err != nil {
		panic(err)
	}
	return cms
}

// revisionOf is the revision a spec with this module and settings names.
func revisionOf(module []byte, settings string) api.Revision {
	spec := api.SchedulingPolicySpec{Module: api.Module{SHA256: source.Digest(module)}}
	if settings != "" {
		spec.Settings = json.RawMessage(settings)
	}
	return api.RevisionOf(&spec)
}

// writeModule writes a module to a file.
func writeModule(t *testing.T, name string, module []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, module, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPushPolicy(t *testing.T) {
	pc := policyEnv(t)
	zonePath := testwasm.Path(t, "examples/zone")
	zone, _ := os.ReadFile(zonePath)
	digest := source.Digest(zone)

	// A new policy: chunks and the resource, with the CRD's defaults.
	out := pc.ok("push", zonePath, "--name", "zone", "--settings", `{"maxSkew": 2}`)
	if want := chunkLines(t, zone, "created") + "schedulingpolicy/zone created\n" + summary("zone", zone); out != want {
		t.Fatalf("first push:\n%s\nwant\n%s", out, want)
	}
	sp := pc.get("zone")
	if sp.Spec.Module != (api.Module{SHA256: digest}) || string(sp.Spec.Settings) != `{"maxSkew":2}` ||
		sp.Spec.Mode != api.ModeEnforce || sp.Spec.Weight != 1 {
		t.Fatalf("spec after the first push: %+v", sp.Spec)
	}
	cm, err := pc.client.CoreV1().ConfigMaps(defaultNamespace).Get(context.Background(), api.ModuleName(digest)+"-0", metav1.GetOptions{})
	if err != nil || cm.Immutable == nil || !*cm.Immutable || cm.Labels[source.LabelModule] != api.ModuleName(digest) {
		t.Fatalf("chunk 0: %v %+v", err, cm)
	}
	if v, err := source.FetchModule(context.Background(), pc.client, defaultNamespace, digest); err != nil || string(v.Module) != string(zone) {
		t.Fatalf("the chunks do not hold the module: %v", err)
	}

	// New settings: the same chunks, the settings updated, the rest kept.
	pc.setStatus("zone", func(sp *api.SchedulingPolicy) { sp.Status.ServingDigest = "kept" })
	out = pc.ok("push", zonePath, "--name", "zone", "--settings", `{"maxSkew": 3}`)
	if want := chunkLines(t, zone, "unchanged") + "schedulingpolicy/zone configured\n" + summary("zone", zone); out != want {
		t.Fatalf("second push:\n%s\nwant\n%s", out, want)
	}
	sp = pc.get("zone")
	if string(sp.Spec.Settings) != `{"maxSkew":3}` || sp.Status.ServingDigest != "kept" {
		t.Fatalf("after the second push: settings %s, status %+v", sp.Spec.Settings, sp.Status)
	}
	chunksBefore, rv := pc.chunks(), sp.ResourceVersion

	// Nothing is written for a module that does not load, or settings the
	// policy refuses.
	nothingWritten := func(what string) {
		t.Helper()
		if got := pc.chunks(); strings.Join(got, ",") != strings.Join(chunksBefore, ",") {
			t.Errorf("%s: chunks %v, want %v", what, got, chunksBefore)
		}
		if got := pc.get("zone").ResourceVersion; got != rv {
			t.Errorf("%s: the SchedulingPolicy was written", what)
		}
	}
	junk := writeModule(t, "junk.wasm", []byte("this is not WebAssembly at all, just some bytes"))
	pc.fails([]string{"push", junk, "--name", "zone"}, "junk.wasm does not load", "nothing written")
	nothingWritten("random bytes")
	pc.fails([]string{"push", zonePath, "--name", "zone", "--settings", `{"maxSkew": 0}`}, `settings: "maxSkew" must be at least 1, got 0`, "nothing written")
	nothingWritten("bad settings")
	// A new policy refused is not created.
	pc.fails([]string{"push", zonePath, "--name", "fresh", "--settings", `{"groupLabel": ""}`}, `settings: "groupLabel" must not be empty`)
	if _, err := pc.dyn.Resource(api.GVR).Namespace(defaultNamespace).Get(context.Background(), "fresh", metav1.GetOptions{}); err == nil {
		t.Error("a policy refused was created")
	}
	// The legacy flow checks too.
	pc.fails([]string{"push", "--configmaps", junk, "--name", "legacy"}, "nothing written")
	if _, err := pc.client.CoreV1().ConfigMaps(defaultNamespace).Get(context.Background(), "legacy-0", metav1.GetOptions{}); err == nil {
		t.Error("push --configmaps wrote a module that does not load")
	}

	// A quarantined revision is refused without --force, and --force
	// clears its entry only.
	key := api.RevisionOf(&sp.Spec).Key
	pc.setStatus("zone", func(sp *api.SchedulingPolicy) {
		sp.Status.Quarantined = []api.Quarantine{
			{Key: "0000000000000000", SHA256: digest, Replica: "sched-1", Reason: "other", At: metav1.Now()},
			{Key: key, SHA256: digest, Replica: "sched-0", Reason: "scheduler exited within probation", At: metav1.Now()},
		}
	})
	rv = pc.get("zone").ResourceVersion
	pc.fails([]string{"push", zonePath, "--name", "zone"}, "is quarantined", "scheduler exited within probation", "sched-0", "--force")
	nothingWritten("quarantined")
	out = pc.ok("push", zonePath, "--name", "zone", "--force")
	if !strings.Contains(out, "schedulingpolicy/zone quarantine of revision "+key+" cleared\n") {
		t.Errorf("push --force:\n%s", out)
	}
	if q := pc.get("zone").Status.Quarantined; len(q) != 1 || q[0].Key != "0000000000000000" {
		t.Errorf("quarantine after --force: %+v", q)
	}

	// Without --settings, the resource's settings are checked.
	u, err := pc.dyn.Resource(api.GVR).Namespace(defaultNamespace).Get(context.Background(), "zone", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.Object["spec"].(map[string]any)["settings"] = map[string]any{"maxSkew": int64(-1)}
	if _, err := pc.dyn.Resource(api.GVR).Namespace(defaultNamespace).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pc.fails([]string{"push", zonePath, "--name", "zone"}, `"maxSkew" must be at least 1, got -1`)
}

// Collection deletes the chunks nothing refers to once they are older than
// the grace period, and keeps what a policy serves, falls back to or may
// roll back to.
func TestPushCollects(t *testing.T) {
	pc := policyEnv(t)
	grace := gcGrace
	t.Cleanup(func() { gcGrace = grace })
	zonePath := testwasm.Path(t, "examples/zone")
	pinPath := testwasm.Path(t, "examples/nodepin")
	zone, _ := os.ReadFile(zonePath)
	pin, _ := os.ReadFile(pinPath)
	zone2 := withCustomSection(zone, "v2", []byte("2"))
	zone3 := withCustomSection(zone, "v3", []byte("3"))
	zone2Path, zone3Path := writeModule(t, "zone2.wasm", zone2), writeModule(t, "zone3.wasm", zone3)

	pc.ok("push", pinPath, "--name", "pin")
	pc.ok("push", zone3Path, "--name", "zone")
	pc.ok("push", zone2Path, "--name", "zone")
	pc.ok("push", zonePath, "--name", "zone")
	// zone serves zone2; its history holds zone2 and zone3.
	pc.setStatus("zone", func(sp *api.SchedulingPolicy) {
		r2, r3 := revisionOf(zone2, ""), revisionOf(zone3, "")
		sp.Status.Serving = &r2
		sp.Status.History = []api.HistoryEntry{{Revision: r2, ProvenAt: metav1.Now()}, {Revision: r3, ProvenAt: metav1.Now()}}
	})
	if err := pc.dyn.Resource(api.GVR).Namespace(defaultNamespace).Delete(context.Background(), "pin", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := func(module []byte) string {
		var b strings.Builder
		for _, cm := range mustPack(module) {
			fmt.Fprintf(&b, "configmap/%s deleted (module not referenced)\n", cm.Name)
		}
		return b.String()
	}
	all := pc.chunks()

	// Young: nothing deleted.
	gcGrace = time.Hour
	if out := pc.ok("push", zonePath, "--name", "zone"); strings.Contains(out, "deleted") {
		t.Fatalf("deleted chunks younger than the grace period:\n%s", out)
	}
	// Old: pin's chunks go (no policy), zone3 stays (history, --keep 2).
	gcGrace = 0
	out := pc.ok("push", zonePath, "--name", "zone", "--keep", "2")
	if want := chunkLines(t, zone, "unchanged") + "schedulingpolicy/zone unchanged\n" + deleted(pin) + summary("zone", zone); out != want {
		t.Fatalf("collection:\n%s\nwant\n%s", out, want)
	}
	// --keep 1: zone3 (the second history entry) goes; zone2 serves.
	out = pc.ok("push", zonePath, "--name", "zone", "--keep", "1")
	if !strings.Contains(out, deleted(zone3)) || strings.Contains(out, api.ModuleName(source.Digest(zone2))) {
		t.Fatalf("collection with --keep 1:\n%s", out)
	}
	var want []string
	for _, m := range [][]byte{zone, zone2} {
		for _, cm := range mustPack(m) {
			want = append(want, cm.Name)
		}
	}
	sort.Strings(want)
	if got := pc.chunks(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("chunks left %v, want %v (of %v)", got, want, all)
	}

	// Two pushes racing: both succeed, the last writer wins, and the
	// module the policy names has its chunks: the grace period keeps a
	// push's fresh chunks from the other's collection (zone3's chunks were
	// collected above, so they are written anew).
	gcGrace = time.Minute
	for range 3 {
		errs := make(chan string, 2)
		for _, path := range []string{zonePath, zone3Path} {
			go func() {
				code, _, stderr := pc.cli("push", path, "--name", "zone", "--keep", "0")
				errs <- fmt.Sprintf("%d %s", code, stderr)
			}()
		}
		for range 2 {
			if e := <-errs; e != "0 " {
				t.Fatalf("racing push: %s", e)
			}
		}
		d := pc.get("zone").Spec.Module.SHA256
		if d != source.Digest(zone) && d != source.Digest(zone3) {
			t.Fatalf("after racing pushes the policy names %s", d)
		}
		if _, err := source.FetchModule(context.Background(), pc.client, defaultNamespace, d); err != nil {
			t.Fatalf("after racing pushes: %v", err)
		}
	}
}

func TestRollback(t *testing.T) {
	pc := policyEnv(t)
	zonePath := testwasm.Path(t, "examples/zone")
	zone, _ := os.ReadFile(zonePath)
	zone2 := withCustomSection(zone, "v2", []byte("2"))
	zone2Path := writeModule(t, "zone2.wasm", zone2)
	pc.ok("push", zonePath, "--name", "zone", "--settings", `{"maxSkew":2}`)
	pc.ok("push", zone2Path, "--name", "zone", "--settings", `{"maxSkew":3}`)
	r1, r2 := revisionOf(zone, `{"maxSkew":2}`), revisionOf(zone2, `{"maxSkew":3}`)
	if got := api.RevisionOf(&pc.get("zone").Spec).Key; got != r2.Key {
		t.Fatalf("spec revision %s, want %s", got, r2.Key)
	}
	// An old revision whose module has no chunks.
	ghost := api.Revision{Module: api.Module{SHA256: strings.Repeat("ab", 32)}}
	ghost = api.RevisionOf(&api.SchedulingPolicySpec{Module: ghost.Module})
	pc.setStatus("zone", func(sp *api.SchedulingPolicy) {
		sp.Status.LastGood = &r1
		sp.Status.History = []api.HistoryEntry{
			{Revision: r2, ProvenAt: metav1.Now()},
			{Revision: r1, ProvenAt: metav1.Now()},
			{Revision: ghost, ProvenAt: metav1.Now()},
		}
	})
	specOf := func() (string, string) {
		sp := pc.get("zone")
		return sp.Spec.Module.SHA256, string(sp.Spec.Settings)
	}

	// To the last good revision, settings and all.
	out := pc.ok("rollback", "zone")
	if want := "schedulingpolicy/zone rolled back to " + r1.Short() + " (last good)\n"; out != want {
		t.Fatalf("rollback:\n%q\nwant\n%q", out, want)
	}
	if d, s := specOf(); d != source.Digest(zone) || s != `{"maxSkew":2}` {
		t.Fatalf("after rollback: %s %s", d, s)
	}
	// At the last good: the newest other history entry (r2).
	pc.ok("rollback", "zone")
	if d, s := specOf(); d != source.Digest(zone2) || s != `{"maxSkew":3}` {
		t.Fatalf("after the second rollback: %s %s", d, s)
	}
	// By digest prefix, with --wait: the scheduler (this test) serves it.
	zoneDigest := source.Digest(zone)
	done := make(chan string)
	go func() {
		_, out, errs := pc.cli("rollback", "zone", zoneDigest[:10], "--wait", "30s")
		done <- out + errs
	}()
	waitFor(t, func() bool { d, _ := specOf(); return d == zoneDigest })
	pc.setStatus("zone", func(sp *api.SchedulingPolicy) {
		sp.Status.Serving = &r1
		sp.Status.ObservedGeneration = sp.Generation
		sp.Status.Conditions = []metav1.Condition{{Type: api.ConditionReady, Status: metav1.ConditionTrue, Reason: api.ReasonServing, LastTransitionTime: metav1.Now()}}
	})
	if got := <-done; !strings.HasSuffix(got, "serving "+zoneDigest[:12]+"\n") {
		t.Fatalf("rollback --wait:\n%s", got)
	}
	if _, s := specOf(); s != `{"maxSkew":2}` {
		t.Fatalf("rollback by digest restored settings %s", s)
	}

	// Missing chunks: nothing written.
	rv := pc.get("zone").ResourceVersion
	pc.fails([]string{"rollback", "zone", "abababab"}, "not found", "nothing written")
	last := mustPack(zone2)[len(mustPack(zone2))-1].Name
	if err := pc.client.CoreV1().ConfigMaps(defaultNamespace).Delete(context.Background(), last, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "missing chunk"
	if len(mustPack(zone2)) == 1 {
		want = "not found"
	}
	pc.fails([]string{"rollback", "zone", source.Digest(zone2)}, want, "nothing written")
	pc.fails([]string{"rollback", "zone", "abc"}, "at least 8 hex digits")
	if pc.get("zone").ResourceVersion != rv {
		t.Fatal("a refused rollback wrote the SchedulingPolicy")
	}
}

// push --wait reports the scheduler's refusal.
func TestPushWaitRejected(t *testing.T) {
	pc := policyEnv(t)
	zonePath := testwasm.Path(t, "examples/zone")
	pc.ok("push", zonePath, "--name", "zone")
	pc.setStatus("zone", func(sp *api.SchedulingPolicy) {
		// A stale refusal, of an earlier generation: does not count.
		sp.Status.ObservedGeneration = sp.Generation
		sp.Status.Conditions = []metav1.Condition{{Type: api.ConditionRejected, Status: metav1.ConditionTrue, Reason: api.ReasonLoadFailed,
			Message: "stale", ObservedGeneration: sp.Generation, LastTransitionTime: metav1.Now()}}
	})
	type result struct {
		code      int
		out, errs string
	}
	done := make(chan result)
	go func() {
		code, out, errs := pc.cli("push", zonePath, "--name", "zone", "--settings", `{"maxSkew":5}`, "--wait", "30s")
		done <- result{code, out, errs}
	}()
	waitFor(t, func() bool { return string(pc.get("zone").Spec.Settings) == `{"maxSkew":5}` })
	time.Sleep(time.Second) // the stale refusal is seen, and ignored
	pc.setStatus("zone", func(sp *api.SchedulingPolicy) {
		sp.Status.ObservedGeneration = sp.Generation
		sp.Status.Conditions = []metav1.Condition{{Type: api.ConditionRejected, Status: metav1.ConditionTrue, Reason: api.ReasonLoadFailed,
			Message: "instance memory limit exceeded", ObservedGeneration: sp.Generation, LastTransitionTime: metav1.Now()}}
	})
	r := <-done
	if r.code != 1 || !strings.Contains(r.errs, "refused revision") || !strings.Contains(r.errs, "LoadFailed: instance memory limit exceeded") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.out, r.errs)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestPolicyStatus(t *testing.T) {
	pc := policyEnv(t)
	zonePath := testwasm.Path(t, "examples/zone")
	zone, _ := os.ReadFile(zonePath)
	pc.ok("push", zonePath, "--name", "zone")
	// No SchedulingPolicy in another namespace: the status ConfigMap
	// report, absent too.
	pc.fails([]string{"status", "--namespace", "nowhere"}, "no SchedulingPolicy in nowhere, and read nowhere/wasmsched-status")

	// A settings-only change: spec and serving share the module with the
	// last good revision, and the table still tells the three apart.
	r := revisionOf(zone, "")
	old := revisionOf(zone, `{"maxSkew":9}`)
	pc.setStatus("zone", func(sp *api.SchedulingPolicy) {
		sp.Status.Serving, sp.Status.LastGood = &r, &old
		sp.Status.LoadedAt = &metav1.Time{Time: time.Now().Add(-5 * time.Second)}
		sp.Status.Conditions = []metav1.Condition{
			{Type: api.ConditionReady, Status: metav1.ConditionTrue, Reason: api.ReasonServing, LastTransitionTime: metav1.Now()},
			{Type: api.ConditionRejected, Status: metav1.ConditionTrue, Reason: api.ReasonLoadFailed, Message: "policy zone: settings:\nbad", LastTransitionTime: metav1.Now()},
		}
		sp.Status.Replicas = []api.ReplicaStatus{
			{Name: "sched-0", Key: r.Key, SHA256: r.Module.SHA256, Ready: true, Heartbeat: metav1.Now()},
			{Name: "sched-1", Profile: "wasm", Key: old.Key, SHA256: old.Module.SHA256, Ready: false, Message: "loading", Heartbeat: metav1.Now()},
		}
	})
	// A profile that selects by a label zone does not carry, as the
	// scheduler publishes it (host/plugin/selection.go).
	report, _ := json.Marshal(lifecycle.ProfileReport{Status: lifecycle.Status{Replica: "sched-0", Profile: "wasmsched", Updated: time.Now()},
		Selection: &lifecycle.PolicySelection{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"wasmsched.io/profile": "wasmsched"}}}})
	if _, err := pc.client.CoreV1().ConfigMaps(defaultNamespace).Create(context.Background(), &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: lifecycle.StatusConfigMap, Namespace: defaultNamespace},
		Data:       map[string]string{"sched-0.wasmsched.json": string(report)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := pc.ok("status")
	d := source.Digest(zone)[:12]
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{
		`^NAME +MODE +SPEC +SERVING +SINCE +LAST GOOD +READY +REASON +AGE$`,
		// SINCE: loaded 5 s before the command ran, which a loaded machine
		// can start a few seconds late.
		`^zone +Enforce +` + r.Key + ` +` + r.Key + ` +([5-9]|\d\d)s +` + old.Key + ` +True +Serving +\d+s$`,
		`^  spec, serving ` + r.Key + `: module ` + d + `, settings none$`,
		`^  last good ` + old.Key + `: module ` + d + `, settings \{"maxSkew":9\}$`,
		`^  rejected: LoadFailed: policy zone: settings: bad$`,
		`^  replica sched-1 \(profile wasm\): serving ` + old.Key + `, not ready: loading$`,
		`^  no scheduler profile selects schedulingpolicy zone: profile wasmsched \(replica sched-0\) selects the labels wasmsched.io/profile=wasmsched; push it with --label wasmsched.io/profile=wasmsched$`,
	}
	if len(lines) != len(want) {
		t.Fatalf("status:\n%s", out)
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d %q does not match %s", i, lines[i], re)
		}
	}
	// Labelled for the profile, the policy is selected: no such line.
	pc.ok("push", zonePath, "--name", "zone", "--label", "wasmsched.io/profile=wasmsched")
	if out := pc.ok("status"); strings.Contains(out, "no scheduler profile") {
		t.Errorf("status of a selected policy:\n%s", out)
	}

	var got []struct {
		Name   string                     `json:"name"`
		Status api.SchedulingPolicyStatus `json:"status"`
	}
	if err := json.Unmarshal([]byte(pc.ok("status", "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "zone" || got[0].Status.Serving == nil || got[0].Status.Serving.Key != r.Key || len(got[0].Status.Replicas) != 2 {
		t.Fatalf("status -o json: %+v", got)
	}
}

func TestDiff(t *testing.T) {
	pc := policyEnv(t)
	ctx := context.Background()
	zonePath := testwasm.Path(t, "examples/zone")
	pc.ok("push", zonePath, "--name", "zone", "--settings", `{"deniedZones": []}`)

	if _, err := pc.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, z := range []string{"a", "b", "c"} {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + z, Labels: map[string]string{"topology.kubernetes.io/zone": z}}}
		if _, err := pc.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(name, app, scheduler, node string) {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps", Labels: map[string]string{}},
			Spec: v1.PodSpec{SchedulerName: scheduler, NodeName: node, Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
		if app != "" {
			p.Labels["app"] = app
		}
		if _, err := pc.client.CoreV1().Pods("apps").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod("web-1", "web", "wasmsched", "node-a") // bound
	pod("plain", "", "wasmsched", "")
	pod("web-2", "web", "wasmsched", "")
	pod("other", "", "other-scheduler", "")

	// Denying zone a moves the pod without a group to node-b; web-2 goes
	// to node-b either way (zone a holds web-1 already).
	out := pc.ok("diff", "zone", zonePath, "--settings", `{"deniedZones": ["a"]}`, "--scheduler-name", "wasmsched")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^POD +SERVING +NEW$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^apps/plain +node-a +node-b$`).MatchString(lines[1]) ||
		!strings.HasPrefix(lines[2], "1 of 2 pending pods would change") {
		t.Fatalf("diff:\n%s", out)
	}
	// Every pending pod, whatever its scheduler.
	out = pc.ok("diff", "zone", zonePath, "--settings", `{"deniedZones": ["a"]}`)
	if !strings.Contains(out, "apps/other ") || !strings.Contains(out, "2 of 3 pending pods would change") {
		t.Fatalf("diff of every pending pod:\n%s", out)
	}
	// Same settings: nothing changes.
	if out = pc.ok("diff", "zone", zonePath); !strings.HasPrefix(out, "0 of 3 pending pods would change") {
		t.Fatalf("diff of the same revision:\n%s", out)
	}
	// Every zone denied: unschedulable, with the reasons.
	var res diffResult
	out = pc.ok("diff", "zone", zonePath, "--settings", `{"deniedZones": ["a", "b", "c"]}`, "--scheduler-name", "wasmsched", "-o", "json")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	unsched := "unschedulable: zone: zone a is denied; zone: zone b is denied; zone: zone c is denied"
	if res.Pending != 2 || res.Changed != 2 || len(res.Changes) != 2 ||
		res.Changes[0] != (podChange{Pod: "apps/plain", Serving: "node-a", New: unsched}) ||
		res.Changes[1] != (podChange{Pod: "apps/web-2", Serving: "node-b", New: unsched}) {
		t.Fatalf("diff -o json: %s", out)
	}
	// A new version that does not load is an error.
	pc.fails([]string{"diff", "zone", zonePath, "--settings", `{"maxSkew": 0}`}, `"maxSkew" must be at least 1`)
}

// push sets the kinds a policy may read (--context) and refuses a module
// reading a kind that would not be allowed, naming the flag; it tells when
// no scheduler profile selects the policy, and with --wait refuses to
// wait for it.
func TestPushContextAndSelection(t *testing.T) {
	pc := policyEnv(t)
	probe := testwasm.Path(t, "test/guests/probe")
	reads := `{"context":["v1/namespaces"]}`

	pc.fails([]string{"push", probe, "--name", "reader", "--settings", reads},
		"reads v1/namespaces, which schedulingpolicy reader would not allow (a new policy's spec.context, empty without --context, allows none): push it with --context v1/namespaces, nothing written")
	if _, err := pc.dyn.Resource(api.GVR).Namespace(defaultNamespace).Get(context.Background(), "reader", metav1.GetOptions{}); err == nil {
		t.Fatal("a refused push created the SchedulingPolicy")
	}
	if code, _, errs := pc.cli("push", probe, "--name", "reader", "--context", "v1/secrets"); code == 0 || !strings.Contains(errs, "v1/secrets: secrets are never readable by policies") {
		t.Fatalf("push --context v1/secrets: exit %d, stderr %q", code, errs)
	}
	pc.ok("push", probe, "--name", "reader", "--settings", reads, "--context", "v1/namespaces")
	if sp := pc.get("reader"); !slices.Equal(sp.Spec.Context, []string{"v1/namespaces"}) {
		t.Fatalf("spec.context %v, want [v1/namespaces]", sp.Spec.Context)
	}
	// The allow-list is kept by later pushes, and --context '' empties it:
	// refused while the module reads the kind.
	pc.ok("push", probe, "--name", "reader")
	pc.fails([]string{"push", probe, "--name", "reader", "--context", ""},
		"reads v1/namespaces, which schedulingpolicy reader would not allow (--context allows none)")

	// Settings refused: the message says where they came from.
	zonePath := testwasm.Path(t, "examples/zone")
	pc.fails([]string{"push", zonePath, "--name", "zone", "--settings", `{"maxSkew":0}`},
		"does not load with the settings of --settings and the default limits, nothing written")

	// A profile selecting by label, as the scheduler publishes it.
	report, _ := json.Marshal(lifecycle.ProfileReport{Status: lifecycle.Status{Replica: "sched-0", Profile: "default-scheduler", Updated: time.Now()},
		Selection: &lifecycle.PolicySelection{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"wasmsched.io/profile": "wasmsched"}}}})
	if _, err := pc.client.CoreV1().ConfigMaps(defaultNamespace).Create(context.Background(), &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: lifecycle.StatusConfigMap, Namespace: defaultNamespace},
		Data:       map[string]string{"sched-0.default-scheduler.json": string(report)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// In a namespace without SchedulingPolicies, status says what the
	// profiles select.
	if _, err := pc.client.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "empty"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.client.CoreV1().ConfigMaps("empty").Create(context.Background(), &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: lifecycle.StatusConfigMap, Namespace: "empty"},
		Data:       map[string]string{"sched-0.default-scheduler.json": string(report)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out := pc.ok("status", "--namespace", "empty"); out != "no SchedulingPolicy in empty; profile default-scheduler (replica sched-0) selects the labels wasmsched.io/profile=wasmsched\n" {
		t.Errorf("status of a namespace without SchedulingPolicies: %q", out)
	}
	unselected := "no scheduler profile selects schedulingpolicy reader: profile default-scheduler (replica sched-0) selects the labels wasmsched.io/profile=wasmsched; push it with --label wasmsched.io/profile=wasmsched"
	before := pc.get("reader").Generation
	pc.fails([]string{"push", probe, "--name", "reader", "--settings", `{"context":["v1/namespaces"],"showContext":true}`, "--wait", "10m"},
		unselected+", nothing written")
	if g := pc.get("reader").Generation; g != before {
		t.Fatalf("push --wait of an unselected policy wrote it (generation %d -> %d)", before, g)
	}
	code, _, errs := pc.cli("push", probe, "--name", "reader")
	if code != 0 || errs != "warning: "+unselected+"\n" {
		t.Fatalf("push of an unselected policy: exit %d, stderr %q", code, errs)
	}
	code, _, errs = pc.cli("push", probe, "--name", "reader", "--label", "wasmsched.io/profile=wasmsched")
	if code != 0 || errs != "" {
		t.Fatalf("push of a selected policy: exit %d, stderr %q", code, errs)
	}
}
