package guesttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
)

// write writes a file into a temporary directory and returns its path.
func write(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const richPod = `
# every field the reader converts
apiVersion: v1
kind: Pod
metadata:
  name: train
  labels: {app: ml, tier: batch}
  annotations: {note: "1"}
  ownerReferences:
  - {kind: Job, name: first, uid: u1}
  - {kind: ReplicaSet, name: ctl, uid: u2, controller: true}
spec:
  priority: 1000
  priorityClassName: high
  nodeName: n-1
  nodeSelector: {disk: ssd}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions: [{key: zone, operator: In, values: [a, b]}]
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 5
        preference: {matchExpressions: [{key: gpu, operator: Exists}]}
  tolerations:
  - {key: dedicated, value: ml, effect: NoSchedule}
  - {operator: Exists, effect: NoExecute, tolerationSeconds: 30}
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: ml}}}
  overhead: {cpu: 10m}
  initContainers:
  - name: setup
    resources: {requests: {cpu: "3", memory: 1Gi}}
  - name: sidecar
    restartPolicy: Always
    resources: {requests: {cpu: 200m}}
  containers:
  - name: a
    resources:
      requests: {cpu: 500m, memory: 256Mi}
      limits: {nvidia.com/gpu: 2, memory: 1Gi}
  - name: b
    resources: {requests: {cpu: 1, example.com/zero: "0"}}
status:
  nominatedNodeName: n-2
`

func TestReadPod(t *testing.T) {
	p := ReadPod(t, write(t, "pod.yaml", richPod))
	m := p.Message()
	if p.Key() != "default/train" || p.UID() != "uid-default-train" || m.SchedulerName != "default-scheduler" {
		t.Errorf("pod %s uid %s scheduler %s: want the defaults eval applies", p.Key(), p.UID(), m.SchedulerName)
	}
	if keys(p.Labels()) != "app=ml tier=batch " || keys(m.Annotations) != "note=1 " || keys(p.NodeSelector()) != "disk=ssd " {
		t.Errorf("labels %q annotations %q selector %q", keys(p.Labels()), keys(m.Annotations), keys(p.NodeSelector()))
	}
	if o := p.Owner(); o.GetName() != "ctl" || o.GetUid() != "u2" {
		t.Errorf("owner %v, want the controller", o)
	}
	if p.Priority() != 1000 || p.PriorityClassName() != "high" || m.NodeName != "n-1" || m.NominatedNodeName != "n-2" {
		t.Errorf("priority %d %s node %s nominated %s", p.Priority(), p.PriorityClassName(), m.NodeName, m.NominatedNodeName)
	}
	if r := p.RequiredNodeAffinity(); len(r) != 1 || r[0].MatchExpressions[0].Key != "zone" || strings.Join(r[0].MatchExpressions[0].Values, ",") != "a,b" {
		t.Errorf("required affinity %v", r)
	}
	if pr := m.PreferredNodeAffinity; len(pr) != 1 || pr[0].Weight != 5 || pr[0].Preference.MatchExpressions[0].Operator != "Exists" {
		t.Errorf("preferred affinity %v", pr)
	}
	tols := p.Tolerations()
	if len(tols) != 2 || tols[0].Operator != "Equal" || tols[1].GetTolerationSeconds() != 30 {
		t.Errorf("tolerations %v: an empty operator reads Equal", tols)
	}
	if !p.Tolerates(&abiv1.Taint{Key: "dedicated", Value: "ml", Effect: "NoSchedule"}) {
		t.Error("does not tolerate its own taint")
	}
	if c := m.TopologySpreadConstraints; len(c) != 1 || c[0].MaxSkew != 1 || keys(c[0].LabelSelector.MatchLabels) != "app=ml " {
		t.Errorf("spread %v", c)
	}
	// Containers: 500m+1 cpu, 256Mi; sidecar 200m adds; the setup init
	// container needs 3 cpu + the sidecars before it (none): max(1.7, 3) = 3;
	// overhead 10m. Memory: max(256Mi, 1Gi); the gpu limit stands in for a
	// request; a zero request is left out.
	for name, want := range map[string]int64{
		guest.ResourceCPU: 3010, guest.ResourceMemory: 1 << 30, "nvidia.com/gpu": 2, "example.com/zero": 0,
	} {
		if got := p.Request(name); got != want {
			t.Errorf("request %s = %d, want %d", name, got, want)
		}
	}
	if len(m.Requests.Scalars) != 1 {
		t.Errorf("scalars %v, want the zero one left out", m.Requests.Scalars)
	}
}

func TestReadNodesPlacesPods(t *testing.T) {
	nodes := write(t, "nodes.yaml", `
apiVersion: v1
kind: NodeList
items:
- kind: Node
  metadata: {name: n-1, labels: {topology.kubernetes.io/zone: a}, annotations: {x: y}}
  spec:
    unschedulable: true
    taints: [{key: k, value: v, effect: NoSchedule}]
  status:
    capacity: {cpu: "4", memory: 8Gi, pods: "110", example.com/none: "0"}
    conditions: [{type: Ready, status: "True", reason: KubeletReady}]
---
---
# a comment only
---
kind: Node
metadata: {name: n-2}
status:
  capacity: {cpu: "8"}
  allocatable: {cpu: 7500m}
`)
	pods := write(t, "pods.yaml", `
kind: Pod
metadata: {name: b, namespace: ns}
spec:
  nodeName: n-1
  containers: [{resources: {requests: {cpu: 250m, example.com/dev: 1}}}]
---
kind: Pod
metadata: {name: a, namespace: ns}
spec:
  nodeName: n-1
  containers: [{resources: {requests: {cpu: 500m}}}]
---
kind: Pod
metadata: {name: pending, namespace: ns}
`)
	got := ReadNodes(t, nodes, ReadPods(t, pods)...)
	if len(got) != 2 {
		t.Fatalf("%d nodes, want 2", len(got))
	}
	n1, n2 := got[0], got[1]
	if n1.Name() != "n-1" || n1.Zone() != "a" || !n1.Unschedulable() || len(n1.Taints()) != 1 {
		t.Errorf("n-1: %s zone %s unschedulable %v taints %v", n1.Name(), n1.Zone(), n1.Unschedulable(), n1.Taints())
	}
	if v, _ := n1.Condition("Ready"); v != "True" {
		t.Errorf("n-1 Ready %q", v)
	}
	if n1.Allocatable(guest.ResourceCPU) != 4000 || n1.Capacity(guest.ResourceMemory) != 8<<30 || n1.Allocatable(guest.ResourcePods) != 110 {
		t.Errorf("n-1 allocatable cpu %d, capacity memory %d: want allocatable defaulted to capacity", n1.Allocatable(guest.ResourceCPU), n1.Capacity(guest.ResourceMemory))
	}
	if s := n1.Message().Node.Allocatable.Scalars; len(s) != 1 || s[0].Name != "example.com/none" {
		t.Errorf("n-1 scalars %v, want the zero one kept", s)
	}
	if n1.PodCount() != 2 || n1.Requested(guest.ResourceCPU) != 750 || n1.Requested("example.com/dev") != 1 || n1.Free(guest.ResourcePods) != 108 {
		t.Errorf("n-1: %d pods, requested cpu %d, dev %d, free pods %d", n1.PodCount(), n1.Requested(guest.ResourceCPU), n1.Requested("example.com/dev"), n1.Free(guest.ResourcePods))
	}
	if ps := n1.Pods(); len(ps) != 2 || ps[0].Name != "a" || ps[1].Name != "b" || ps[0].Requests.MilliCpu != 500 {
		t.Errorf("n-1 pods %v, want a and b sorted with their requests", ps)
	}
	if n2.Allocatable(guest.ResourceCPU) != 7500 || n2.Capacity(guest.ResourceCPU) != 8000 || n2.PodCount() != 0 {
		t.Errorf("n-2: allocatable %d capacity %d pods %d", n2.Allocatable(guest.ResourceCPU), n2.Capacity(guest.ResourceCPU), n2.PodCount())
	}
	c := NewCycle(ReadPods(t, pods)[2], got...)
	if c.NodeByName("n-2") != n2 || c.NodeByName("n-3") != nil {
		t.Error("NodeByName over the nodes read")
	}
}

func TestReadErrors(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"kind: Node\nmetadata: {name: n}\n", "document 1 is Node, want Pod"},
		{"metadata: {name: n}\n", "an object without kind"},
		{"kind: Pod\nmetadata: {}\n", "no metadata.name"},
		{"# nothing\n", "no Pod found"},
		{"kind: Pod\nmetadata: {name: p}\nspec: {containers: [{resources: {requests: {cpu: 1x}}}]}\n", `unknown unit "x"`},
		{"kind: PodList\nitems: [{kind: Pod, metadata: {name: a}}, {kind: Node}]\n", "document 1 item 2 is Node"},
		{"kind: Pod\n  bad: indent\n", "not valid YAML"},
	} {
		if _, err := readPods(write(t, "f.yaml", tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.body, err, tc.want)
		}
	}
	nodes, err := readNodes(write(t, "n.yaml", "kind: Node\nmetadata: {name: n-1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	stray := guest.NewPod(&abiv1.Pod{Name: "p", Namespace: "ns", NodeName: "gone"})
	if err := place(nodes, []*guest.Pod{stray}); err == nil || !strings.Contains(err.Error(), "pod ns/p is on node gone") {
		t.Errorf("a pod on a missing node: %v", err)
	}
}

func TestAmount(t *testing.T) {
	for _, tc := range []struct {
		name, q string
		want    int64
	}{
		{"cpu", "100m", 100}, {"cpu", "2", 2000}, {"cpu", "0.5", 500}, {"cpu", "1n", 1}, {"cpu", "1.0001", 1001},
		{"memory", "1Gi", 1 << 30}, {"memory", "1.5Ki", 1536}, {"memory", "128974848", 128974848},
		{"memory", "129e6", 129000000}, {"memory", "129M", 129000000}, {"memory", "1E", 1e18},
		{"memory", "1e-3", 1}, {"memory", "+1k", 1000}, {"nvidia.com/gpu", "8", 8}, {"pods", "110", 110},
	} {
		got, err := amount(tc.name, quantity(tc.q))
		if err != nil || got != tc.want {
			t.Errorf("%s %q = %d, %v; want %d", tc.name, tc.q, got, err, tc.want)
		}
	}
	for _, q := range []string{"", "x", "1.2.3", "1Gb", "1e", "1e99", "99999999999999999999", "1e+x"} {
		if v, err := amount("memory", quantity(q)); err == nil {
			t.Errorf("%q = %d, want an error", q, v)
		}
	}
}

func TestLoad(t *testing.T) {
	type settings struct{ N int }
	build := func(s settings) (int, error) { return s.N * 2, nil }
	if got := Load(t, `{"N": 4}`, settings{N: 1}, build); got != 8 {
		t.Errorf("Load = %d, want 8", got)
	}
	if got := Load(t, "", settings{N: 1}, build); got != 2 {
		t.Errorf("Load of no settings = %d, want the defaults' 2", got)
	}
}
