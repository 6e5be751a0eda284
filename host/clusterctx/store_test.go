package clusterctx

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

func namespace(name, rv string, labels map[string]string) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: rv, Labels: labels,
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
}

func quota(ns, name, rv, maxCPU string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1",
		"kind":       "ElasticQuota",
		"metadata": map[string]any{"namespace": ns, "name": name, "uid": "uid-" + name, "resourceVersion": rv,
			"managedFields": []any{map[string]any{"manager": "kubectl"}}},
		"spec": map[string]any{"max": map[string]any{"cpu": maxCPU}, "min": map[string]any{"cpu": "1"}},
	}}
}

// decode appends entries to a NodeSync and decodes it.
func decode(t *testing.T, entries []byte) *abiv1.NodeSync {
	t.Helper()
	var m abiv1.NodeSync
	if err := m.UnmarshalVT(entries); err != nil {
		t.Fatalf("entries do not decode as NodeSync: %v", err)
	}
	return &m
}

// summary renders a NodeSync's context fields: "reset[k] +ns/name@rv -ns/name".
func summary(m *abiv1.NodeSync) string {
	var parts []string
	for _, k := range m.ObjectsReset {
		parts = append(parts, fmt.Sprintf("reset[%d]", k))
	}
	for _, o := range m.Objects {
		parts = append(parts, fmt.Sprintf("+%d:%s/%s@%s", o.Kind, o.Namespace, o.Name, o.ResourceVersion))
	}
	for _, o := range m.ObjectsRemoved {
		parts = append(parts, fmt.Sprintf("-%d:%s/%s", o.Kind, o.Namespace, o.Name))
	}
	for _, u := range m.TenantUsage {
		parts = append(parts, fmt.Sprintf("%s=%s:cpu%d,mem%d,pods%d%s", u.Key, u.Tenant, u.Requested.GetMilliCpu(), u.Requested.GetMemory(), u.Requested.GetPods(), scalars(u.Requested)))
	}
	return strings.Join(parts, " ")
}

func scalars(r *abiv1.Resources) string {
	s := ""
	for _, sc := range r.GetScalars() {
		s += fmt.Sprintf(",%s%d", sc.Name, sc.Value)
	}
	return s
}

func since(t *testing.T, s *Store, kind int32, seq uint64) (string, uint64, int) {
	t.Helper()
	out, next, n := s.AppendSince(nil, kind, seq)
	return summary(decode(t, out)), next, n
}

func TestStoreChangeLog(t *testing.T) {
	s := NewStore(KindNamespace)
	if got, next, n := since(t, s, 0, 0); got != "" || next != 0 || n != 0 {
		t.Fatalf("empty store: %q next %d n %d", got, next, n)
	}
	must(t, s.Set(namespace("a", "1", nil)))
	must(t, s.Set(namespace("b", "1", nil)))
	got, pos, n := since(t, s, 3, 0)
	if got != "+3:/a@1 +3:/b@1" || n != 2 {
		t.Fatalf("first sync: %q (%d)", got, n)
	}
	// Kind index 0 is left out on the wire and still decodes as 0.
	if got, _, _ := since(t, s, 0, 0); got != "+0:/a@1 +0:/b@1" {
		t.Fatalf("kind 0: %q", got)
	}
	// A resync (same uid and resource version) is no change.
	must(t, s.Set(namespace("a", "1", nil)))
	if got, next, n := since(t, s, 3, pos); got != "" || next != pos || n != 0 {
		t.Fatalf("after a resync: %q next %d (was %d)", got, next, pos)
	}
	// Coalescing: a changed three times is sent once, at its last version;
	// c added then deleted is sent as a removal only to whoever may hold it.
	must(t, s.Set(namespace("a", "2", nil)))
	must(t, s.Set(namespace("a", "3", nil)))
	must(t, s.Set(namespace("c", "1", nil)))
	must(t, s.Set(namespace("a", "4", nil)))
	s.Delete("", "c")
	s.Delete("", "nothing")
	got, pos2, n := since(t, s, 3, pos)
	if got != "+3:/a@4 -3:/c" || n != 2 {
		t.Fatalf("incremental: %q (%d)", got, n)
	}
	if got, _, _ := since(t, s, 3, 0); got != "+3:/b@1 +3:/a@4" {
		t.Fatalf("from scratch: %q", got)
	}
	if got, _, n := since(t, s, 3, pos2); got != "" || n != 0 {
		t.Fatalf("up to date: %q", got)
	}
	if s.Len() != 2 {
		t.Fatalf("Len %d, want 2", s.Len())
	}
	// Re-created after deletion.
	must(t, s.Set(namespace("c", "9", nil)))
	if got, _, _ := since(t, s, 1, pos2); got != "+1:/c@9" {
		t.Fatalf("re-created: %q", got)
	}
}

func TestStoreCompactionResets(t *testing.T) {
	s := NewStore(KindNamespace)
	for i := range 10 {
		must(t, s.Set(namespace(fmt.Sprint("keep", i), "1", nil)))
	}
	_, early, _ := s.AppendSince(nil, 0, 0)
	must(t, s.Set(namespace("gone", "1", nil)))
	_, withGone, _ := s.AppendSince(nil, 0, 0)
	s.Delete("", "gone")
	// Many updates: the log is compacted, positions stay valid.
	for i := range 5000 {
		must(t, s.Set(namespace("keep0", fmt.Sprint(i+2), nil)))
	}
	if len(s.log) > 2*len(s.objs)+logSlack {
		t.Fatalf("log not compacted: %d records for %d objects", len(s.log), len(s.objs))
	}
	if got, _, _ := since(t, s, 2, withGone); got != "+2:/keep0@5001 -2:/gone" {
		t.Fatalf("after compaction: %q", got)
	}
	// Many deletions: tombstones are dropped and the floor rises; a
	// position from before gets a reset and everything.
	for i := range tombstoneSlack + 10 {
		name := fmt.Sprint("tmp", i)
		must(t, s.Set(namespace(name, "1", nil)))
		s.Delete("", name)
	}
	if s.floor == 0 {
		t.Fatal("no tombstone was dropped")
	}
	got, next, n := since(t, s, 2, early)
	want := "reset[2] +2:/keep1@1 +2:/keep2@1 +2:/keep3@1 +2:/keep4@1 +2:/keep5@1 +2:/keep6@1 +2:/keep7@1 +2:/keep8@1 +2:/keep9@1 +2:/keep0@5001"
	if got != want || n != 10 || next != s.Seq() {
		t.Fatalf("below the floor:\n got %q (%d)\nwant %q", got, n, want)
	}
	// From the current position: nothing.
	if got, _, _ := since(t, s, 2, next); got != "" {
		t.Fatalf("current: %q", got)
	}
}

func TestStoreEncoding(t *testing.T) {
	s := NewStore(KindNamespace)
	ns := namespace("team-a", "7", map[string]string{"z": "1", "tenant": "a"})
	must(t, s.Set(ns))
	if len(ns.ManagedFields) != 1 {
		t.Fatal("Set modified the informer's object")
	}
	m := decode(t, first(s.AppendSince(nil, 1, 0)))
	o := m.Objects[0]
	if o.Uid != "uid-team-a" || o.Name != "team-a" || len(o.Labels) != 2 || o.Labels[0].Key != "tenant" || o.Labels[1].Key != "z" {
		t.Fatalf("object %+v", o)
	}
	var back v1.Namespace
	must(t, json.Unmarshal(o.Json, &back))
	if back.Name != "team-a" || len(back.ManagedFields) != 0 || strings.Contains(string(o.Json), "managedFields") {
		t.Fatalf("json %s", o.Json)
	}

	q := NewStore(KindElasticQuota)
	eq := quota("team-a", "quota", "3", "4")
	must(t, q.Set(eq))
	if _, ok := eq.Object["metadata"].(map[string]any)["managedFields"]; !ok {
		t.Fatal("Set modified the unstructured object")
	}
	m = decode(t, first(q.AppendSince(nil, 0, 0)))
	js := string(m.Objects[0].Json)
	if strings.Contains(js, "managedFields") || !strings.Contains(js, `"kind":"ElasticQuota"`) || !strings.Contains(js, `"max":{"cpu":"4"}`) {
		t.Fatalf("json %s", js)
	}
	if m.Objects[0].Namespace != "team-a" {
		t.Fatalf("namespace %q", m.Objects[0].Namespace)
	}
}

func TestStoreHandler(t *testing.T) {
	s := NewStore(KindNamespace)
	h := s.Handler()
	h.OnAdd(namespace("a", "1", nil), true)
	h.OnUpdate(nil, namespace("a", "2", nil))
	h.OnAdd(namespace("b", "1", nil), true)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "b", Obj: namespace("b", "1", nil)})
	if got, _, _ := since(t, s, 0, 0); got != "+0:/a@2" {
		t.Fatalf("%q", got)
	}
}

func TestSplitEntries(t *testing.T) {
	s := NewStore(KindNamespace)
	for i := range 50 {
		must(t, s.Set(namespace(fmt.Sprint("ns", i), "1", map[string]string{"pad": strings.Repeat("x", 100)})))
	}
	_, pos, _ := s.AppendSince(nil, 0, 0)
	for i := range 50 {
		must(t, s.Set(namespace(fmt.Sprint("ns", i), "2", nil)))
	}
	s.Delete("", "ns3")
	s.floor = pos + 1 // force a reset
	all, _, n := s.AppendSince(nil, 5, pos)
	pieces := SplitEntries(all, 1000)
	if len(pieces) < 3 {
		t.Fatalf("%d pieces", len(pieces))
	}
	objects, joined := 0, 0
	for i, p := range pieces {
		if len(p) > 1000 {
			t.Fatalf("piece %d: %d bytes", i, len(p))
		}
		m := decode(t, p)
		if (i == 0) != (len(m.ObjectsReset) == 1) {
			t.Fatalf("piece %d: reset %v", i, m.ObjectsReset)
		}
		objects += len(m.Objects)
		joined += len(p)
	}
	if objects != n || n != 49 || joined != len(all) {
		t.Fatalf("%d objects in pieces, %d appended, %d bytes of %d", objects, n, joined, len(all))
	}
}

func first(b []byte, _ uint64, _ int) []byte { return b }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// OnChange's listeners hear every recorded change, and nothing else: an
// informer's resync of an object the store holds is not a change.
func TestStoreOnChange(t *testing.T) {
	s := NewStore(Kind{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "elasticquotas"})
	var a, b int
	s.OnChange(func() { a++ })
	s.OnChange(func() { b++ })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Set(quota("team-a", "q", "1", "4")))
	must(s.Set(quota("team-a", "q", "1", "4"))) // resync
	must(s.Set(quota("team-a", "q", "2", "6")))
	s.Delete("team-a", "q")
	s.Delete("team-a", "q") // gone already
	if a != 3 || b != 3 {
		t.Errorf("listeners heard %d and %d changes, want 3 each (add, update, delete)", a, b)
	}
}
