// Package guesttest gives a policy's native tests what the host would
// send the policy, without WebAssembly: pods and nodes as abi/v1 messages
// wrapped in the SDK's views, with every list sorted as the host sorts it.
// They come from builders, which follow the wrappers of
// k8s.io/kubernetes/pkg/scheduler/testing:
//
//	web := guesttest.MakePod().Namespace("default").Name("web-1").Label("app", "web")
//	node := guesttest.MakeNode().Name("a-1").Label(guest.LabelZone, "a").Pods(web.Placed()).Obj()
//	pod := guesttest.MakePod().Namespace("default").Name("web-2").Label("app", "web").Obj()
//
// or from the Kubernetes YAML that `wasmsched eval` reads (ReadPod,
// ReadPods, ReadNodes), converted as the host converts objects. NewCycle
// starts a cycle over a given set of nodes, so that Cycle.EachNode and
// Cycle.NodeByName work; Load builds the policy from settings as its
// Settings hook does; CheckStatus compares the Status a policy returns with
// the one a table wants:
//
//	p := guesttest.Load(t, `{"maxSkew": 2}`, DefaultSettings(), New)
//	nodes := guesttest.ReadNodes(t, "testdata/nodes.yaml", guesttest.ReadPods(t, "testdata/pods.yaml")...)
//	c := guesttest.NewCycle(guesttest.ReadPod(t, "testdata/pod.yaml"), nodes...)
//	guesttest.CheckStatus(t, p.PreFilter(c), guest.OK())
//
// MakeCluster describes the cluster objects and tenant usage a policy that
// declares them reads (the YAML `wasmsched eval` reads with --objects), and
// makes a cycle that reads them:
//
//	c := guesttest.MakeCluster().Objects(t, "testdata/quotas.yaml").
//		Usage("", "ml", map[string]string{"cpu": "6"}, 3).Cycle(pod, policy.Context, nodes...)
//
// It is part of the SDK's module and imports abi/v1, guest and a YAML
// decoder only: never host code or Kubernetes. It is meant for tests; a
// policy's WebAssembly build never links it.
package guesttest

import (
	"slices"
	"sort"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
)

// PodWrapper describes a pod. Its setters return the wrapper, so calls
// chain; Obj, Placed and Waiting build a new message from it each time. It
// is not safe for concurrent use.
type PodWrapper struct {
	name, namespace, uid string
	labels, annotations  map[string]string
	nodeSelector         map[string]string
	requests             map[string]int64
	podGroup             string
}

// MakePod starts a pod with no name, namespace, UID, labels or requests.
func MakePod() *PodWrapper { return &PodWrapper{} }

// Name sets the pod's name.
func (p *PodWrapper) Name(name string) *PodWrapper { p.name = name; return p }

// Namespace sets the pod's namespace.
func (p *PodWrapper) Namespace(ns string) *PodWrapper { p.namespace = ns; return p }

// UID sets the pod's UID, which WaitingPodAction names.
func (p *PodWrapper) UID(uid string) *PodWrapper { p.uid = uid; return p }

// Label sets a label.
func (p *PodWrapper) Label(key, value string) *PodWrapper {
	p.labels = set(p.labels, key, value)
	return p
}

// Labels sets each of labels.
func (p *PodWrapper) Labels(labels map[string]string) *PodWrapper {
	for k, v := range labels {
		p.Label(k, v)
	}
	return p
}

// Annotation sets an annotation.
func (p *PodWrapper) Annotation(key, value string) *PodWrapper {
	p.annotations = set(p.annotations, key, value)
	return p
}

// Annotations sets each of annotations.
func (p *PodWrapper) Annotations(annotations map[string]string) *PodWrapper {
	for k, v := range annotations {
		p.Annotation(k, v)
	}
	return p
}

// NodeSelector sets each entry of the pod's node selector.
func (p *PodWrapper) NodeSelector(selector map[string]string) *PodWrapper {
	for k, v := range selector {
		p.nodeSelector = set(p.nodeSelector, k, v)
	}
	return p
}

// Req sets each of the pod's requests, named and counted as guest.Quantity
// reads them: milli-CPU for "cpu", bytes for memory, a count for an
// extended resource such as nvidia.com/gpu.
func (p *PodWrapper) Req(requests map[string]int64) *PodWrapper {
	p.requests = merge(p.requests, requests)
	return p
}

// Obj returns the pod as the host sends the pod being scheduled.
func (p *PodWrapper) Obj() *guest.Pod {
	return guest.NewPod(&abiv1.Pod{
		Name:         p.name,
		Namespace:    p.namespace,
		Uid:          p.uid,
		Labels:       KeyValues(p.labels),
		Annotations:  KeyValues(p.annotations),
		NodeSelector: KeyValues(p.nodeSelector),
		Requests:     Resources(p.requests),
		PodGroup:     p.podGroup,
	})
}

// Placed returns the pod as the host lists it among a node's pods
// (NodeInfo.Pods, for a policy that sets Policy.WantsPods).
func (p *PodWrapper) Placed() *abiv1.PodSummary {
	return &abiv1.PodSummary{
		Name:      p.name,
		Namespace: p.namespace,
		Uid:       p.uid,
		Labels:    KeyValues(p.labels),
		Requests:  Resources(p.requests),
	}
}

// Waiting returns the pod as the host passes it to Permit and Unreserve:
// waiting at Permit, assumed on node. The host-side calls take the message
// itself, Waiting(node).Message().
func (p *PodWrapper) Waiting(node string) guest.WaitingPod {
	return guest.NewWaitingPod(&abiv1.WaitingPod{
		Name:        p.name,
		Namespace:   p.namespace,
		Uid:         p.uid,
		Labels:      KeyValues(p.labels),
		Annotations: KeyValues(p.annotations),
		NodeName:    node,
	})
}

// NodeWrapper describes a node and what the scheduler knows of it. Its
// setters return the wrapper, so calls chain; Obj builds a new message from
// it each time. It is not safe for concurrent use.
type NodeWrapper struct {
	name                   string
	labels                 map[string]string
	allocatable, requested map[string]int64
	pods                   []*abiv1.PodSummary
	generation             int64
}

// MakeNode starts a node with no name, labels, resources or pods, at
// generation 0.
func MakeNode() *NodeWrapper { return &NodeWrapper{} }

// Name sets the node's name.
func (n *NodeWrapper) Name(name string) *NodeWrapper { n.name = name; return n }

// Label sets a label.
func (n *NodeWrapper) Label(key, value string) *NodeWrapper {
	n.labels = set(n.labels, key, value)
	return n
}

// Labels sets each of labels.
func (n *NodeWrapper) Labels(labels map[string]string) *NodeWrapper {
	for k, v := range labels {
		n.Label(k, v)
	}
	return n
}

// Allocatable sets each of the node's allocatable amounts, in the units of
// PodWrapper.Req.
func (n *NodeWrapper) Allocatable(amounts map[string]int64) *NodeWrapper {
	n.allocatable = merge(n.allocatable, amounts)
	return n
}

// Requested sets each amount the pods on the node request, assumed pods
// included, in the units of PodWrapper.Req. Pods does not add the pods'
// requests to it (the host sends the scheduler's totals, whatever pods it
// lists), but counts them under "pods", as the host does, unless amounts
// set "pods".
func (n *NodeWrapper) Requested(amounts map[string]int64) *NodeWrapper {
	n.requested = merge(n.requested, amounts)
	return n
}

// Pods adds pods to the node's list (see PodWrapper.Placed) and counts
// them in its pod count.
func (n *NodeWrapper) Pods(pods ...*abiv1.PodSummary) *NodeWrapper {
	n.pods = append(n.pods, pods...)
	return n
}

// Generation sets the node's generation, which the scheduler raises on
// every change of the node or its pods: a policy may keep what it computed
// for one generation of a node.
func (n *NodeWrapper) Generation(g int64) *NodeWrapper { n.generation = g; return n }

// Obj returns the node as the host sends it.
func (n *NodeWrapper) Obj() *guest.NodeInfo {
	return guest.NewNodeInfo(&abiv1.NodeInfo{
		Generation: n.generation,
		Node: &abiv1.Node{
			Name:        n.name,
			Labels:      KeyValues(n.labels),
			Allocatable: Resources(n.allocatable),
		},
		Requested: requestedOn(n.requested, len(n.pods)),
		PodCount:  int32(len(n.pods)),
		Pods:      slices.Clone(n.pods),
	})
}

// requestedOn is a node's requested resources as the host sends them:
// amounts as Resources makes them, never nil, with the pods on the node
// counted under "pods" unless amounts has that count.
func requestedOn(amounts map[string]int64, pods int) *abiv1.Resources {
	r := Resources(amounts)
	if r == nil {
		r = &abiv1.Resources{}
	}
	if _, ok := amounts[guest.ResourcePods]; !ok {
		r.Pods = int64(pods)
	}
	return r
}

// KeyValues returns m as the host sends labels, annotations and selectors:
// a list sorted by key; nil when m is empty.
func KeyValues(m map[string]string) []*abiv1.KeyValue {
	if len(m) == 0 {
		return nil
	}
	out := make([]*abiv1.KeyValue, 0, len(m))
	for k, v := range m {
		out = append(out, &abiv1.KeyValue{Key: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// setAmount sets one named amount in r as the host places it: the four
// core resources in their fields, any other appended as a scalar.
func setAmount(r *abiv1.Resources, name string, v int64) {
	switch name {
	case guest.ResourceCPU:
		r.MilliCpu = v
	case guest.ResourceMemory:
		r.Memory = v
	case guest.ResourceEphemeralStorage:
		r.EphemeralStorage = v
	case guest.ResourcePods:
		r.Pods = v
	default:
		r.Scalars = append(r.Scalars, &abiv1.Scalar{Name: name, Value: v})
	}
}

// Resources returns amounts (named and counted as guest.Quantity reads them)
// as the host sends them: the four core resources in their fields, every
// other as a scalar, scalars sorted by name. Zero amounts are left out, as
// absent and zero read the same; nil when nothing is left.
func Resources(amounts map[string]int64) *abiv1.Resources {
	var r abiv1.Resources
	empty := true
	for name, v := range amounts {
		if v == 0 {
			continue
		}
		empty = false
		setAmount(&r, name, v)
	}
	if empty {
		return nil
	}
	sort.Slice(r.Scalars, func(i, j int) bool { return r.Scalars[i].Name < r.Scalars[j].Name })
	return &r
}

// NewCycle returns a cycle of pod over nodes, as the SDK starts one: its
// EachNode and NodeByName see exactly nodes, in this order. It is
// guest.NewCycle.
func NewCycle(pod *guest.Pod, nodes ...*guest.NodeInfo) *guest.Cycle {
	return guest.NewCycle(pod, nodes)
}

// Load builds a policy from settings as its Settings hook does, with
// guest.Load, and fails t if they are refused. Use guest.Load itself to
// test the refusals.
func Load[S, P any](t testing.TB, settings string, defaults S, build func(S) (P, error)) P {
	t.Helper()
	p, err := guest.Load([]byte(settings), defaults, build)
	if err != nil {
		t.Fatalf("settings %s: %v", settings, err)
	}
	return p
}

// CheckStatus reports an error on t unless got has want's code and
// reasons, and returns whether it has. Build want with the constructors a
// policy uses (guest.OK(), guest.Reject(...)); give the failure its context
// with a subtest.
func CheckStatus(t testing.TB, got, want guest.Status) bool {
	t.Helper()
	if got.Code != want.Code || !slices.Equal(got.Reasons, want.Reasons) {
		t.Errorf("status %v %q, want %v %q", got.Code, got.Reasons, want.Code, want.Reasons)
		return false
	}
	return true
}

func set(m map[string]string, key, value string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[key] = value
	return m
}

func merge(m, add map[string]int64) map[string]int64 {
	for k, v := range add {
		if m == nil {
			m = map[string]int64{}
		}
		m[k] = v
	}
	return m
}
