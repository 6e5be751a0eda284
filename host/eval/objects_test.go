package eval

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/clusterctx"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

func TestResource(t *testing.T) {
	for kind, want := range map[string]string{
		"Namespace": "namespaces", "PriorityClass": "priorityclasses", "ElasticQuota": "elasticquotas",
		"NodeResourceTopology": "noderesourcetopologies", "Policy": "policies", "Gateway": "gateways",
		"Ingress": "ingresses", "Box": "boxes", "Mesh": "meshes", "Endpoints": "endpoints",
	} {
		if got := Resource(kind, nil); got != want {
			t.Errorf("%s: %s, want %s", kind, got, want)
		}
	}
	if got := Resource("Octopus", map[string]string{ResourceAnnotation: "octopodes"}); got != "octopodes" {
		t.Errorf("hint: %s", got)
	}
}

const objectsYAML = `
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
  labels: {tenant: a}
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: ElasticQuota
metadata: {name: quota, namespace: team-a}
spec:
  max: {cpu: "4"}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: ignored, namespace: team-a}
- apiVersion: v1
  kind: Secret
  metadata: {name: never, namespace: team-a}
`

func TestParseObjects(t *testing.T) {
	objs, err := ParseObjects("objects.yaml", []byte(objectsYAML))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 4 || objs[1].GetUID() != "uid-team-a-quota" || objs[1].GetResourceVersion() != "1" {
		t.Fatalf("%d objects: %v", len(objs), objs)
	}
	k, _ := KindOf(objs[1])
	if k != clusterctx.KindElasticQuota {
		t.Fatalf("kind %v", k)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"kind: Namespace\nmetadata: {name: x}", "do not name a kind"},
		{"apiVersion: v1\nmetadata: {name: x}", "without kind"},
		{"apiVersion: v1\nkind: Namespace\nmetadata: {}", "no metadata.name"},
		{"apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: x}", "is also document 1"},
	} {
		if _, err := ParseObjects("f.yaml", []byte(bad.yaml)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.yaml, err, bad.want)
		}
	}
}

// A policy declaring context sees the objects of its kinds, encoded as the
// scheduler's informers give them, and usage from the placed pods; the
// next evaluation replaces both.
func TestEvaluateWithObjects(t *testing.T) {
	ctx := context.Background()
	ev, err := Load(ctx, []PolicySpec{{Name: "probe", Wasm: testwasm.Bytes(t, "test/guests/probe"),
		Settings: []byte(`{"context": ["v1/namespaces", "scheduling.x-k8s.io/v1alpha1/elasticquotas"], "namespaceUsage": true}`)}})
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close(ctx)
	objs, err := ParseObjects("objects.yaml", []byte(objectsYAML))
	if err != nil {
		t.Fatal(err)
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourcePods: resource.MustParse("10")}}}
	placed := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "team-a", UID: "old"}, Spec: v1.PodSpec{NodeName: "n1",
		Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}}}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "team-a", UID: "new"}}
	rep, err := ev.Evaluate(ctx, Input{Pod: pod, Nodes: []*v1.Node{node}, Pods: []*v1.Pod{placed}, Objects: objs})
	if err != nil || rep.Err() != nil || rep.Selected != "n1" {
		t.Fatalf("evaluate: %v %v %+v", err, rep.Err(), rep)
	}
	st := ev.Policies()[0].Stats()
	if st.ObjectsSent != 2 || st.TenantUsageSent != 1 {
		t.Fatalf("stats %+v", st)
	}
	ns := ev.ctx.stores[clusterctx.KindNamespace]
	out, _, _ := ns.AppendSince(nil, 0, 0)
	var m abiv1.NodeSync
	if err := m.UnmarshalVT(out); err != nil {
		t.Fatal(err)
	}
	js := string(m.Objects[0].Json)
	if strings.Contains(js, "apiVersion") || !strings.Contains(js, `"name":"team-a"`) || m.Objects[0].Labels[0].Key != "tenant" {
		t.Fatalf("namespace as the informer gives it: %s", js)
	}
	if got := ev.ctx.usage.Get("", "team-a").GetMilliCpu(); got != 1000 {
		t.Fatalf("usage %d", got)
	}
	// Next evaluation without objects or pods: removed.
	if _, err := ev.Evaluate(ctx, Input{Pod: pod, Nodes: []*v1.Node{node}}); err != nil {
		t.Fatal(err)
	}
	st = ev.Policies()[0].Stats()
	if st.ObjectsSent != 4 || st.TenantUsageSent != 2 || ev.ctx.usage.Get("", "team-a") != nil {
		t.Fatalf("after removal: stats %+v", st)
	}
	// Secrets are refused at load.
	_, err = Load(ctx, []PolicySpec{{Name: "probe", Wasm: testwasm.Bytes(t, "test/guests/probe"), Settings: []byte(`{"context": ["v1/secrets"]}`)}})
	if err == nil || !strings.Contains(err.Error(), "never readable") {
		t.Fatalf("secrets: %v", err)
	}
}

// Objects, nodes and pods are checked as the API server checks them when
// they are created: an offline run never passes on an object that could
// not exist.
func TestReadValidatesAsAPIServer(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		parse     func(string, []byte) error
		want      string
	}{
		{"label value with a colon", "kind: Namespace\napiVersion: v1\nmetadata:\n  name: team-a\n  labels:\n    exempt: \"yes:please\"\n",
			func(p string, b []byte) error { _, err := ParseObjects(p, b); return err },
			`objects.yaml: document 1: Namespace "team-a" would be refused by the API server: metadata.labels: Invalid value: "yes:please"`},
		{"namespace name not a DNS label", "kind: Namespace\napiVersion: v1\nmetadata:\n  name: team.a\n",
			func(p string, b []byte) error { _, err := ParseObjects(p, b); return err },
			`Namespace "team.a" would be refused by the API server: metadata.name: Invalid value: "team.a"`},
		{"node label key", "kind: Node\napiVersion: v1\nmetadata:\n  name: n1\n  labels:\n    \"bad key!\": x\n",
			func(p string, b []byte) error { _, err := ParseNodes(p, b); return err },
			`Node "n1" would be refused by the API server: metadata.labels: Invalid value: "bad key!"`},
		{"pod name with capitals", "kind: Pod\napiVersion: v1\nmetadata:\n  name: Web\nspec:\n  containers: [{name: c, image: x}]\n",
			func(p string, b []byte) error { _, err := ParsePods(p, b); return err },
			`Pod "Web" would be refused by the API server: metadata.name: Invalid value: "Web"`},
		{"annotation key", "kind: Pod\napiVersion: v1\nmetadata:\n  name: web\n  annotations:\n    \"a b\": x\nspec:\n  containers: [{name: c, image: x}]\n",
			func(p string, b []byte) error { _, err := ParsePods(p, b); return err },
			`metadata.annotations: Invalid value: "a b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.parse("objects.yaml", []byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
