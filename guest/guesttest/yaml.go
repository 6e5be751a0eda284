package guesttest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
)

// ReadPod reads the one Pod of a YAML or JSON file, such as the --pod of
// `wasmsched eval`, and returns it as the host sends the pod being
// scheduled. It fails t unless the file holds exactly one Pod.
func ReadPod(t testing.TB, path string) *guest.Pod {
	t.Helper()
	pods := ReadPods(t, path)
	if len(pods) != 1 {
		t.Fatalf("%s: holds %d pods, want exactly 1", path, len(pods))
	}
	return pods[0]
}

// ReadPods reads every Pod of a file of YAML or JSON documents (separated
// by ---, or items of a List), as the host converts them; give the ones
// with spec.nodeName to ReadNodes to place them. It fails t on anything
// but Pods.
//
// The conversion reads what policies read: name, namespace ("default" when
// absent), uid ("uid-<namespace>-<name>" when absent, as `wasmsched eval`
// makes it), labels, annotations, owner, priority and its class, scheduler
// name, node selector, node affinity, tolerations, topology spread
// constraints, node name, nominated node name, and the effective requests,
// computed as the scheduler does (containers, restartable and other init
// containers, overhead; a container's limit stands in for a request it
// does not set, as the API server's defaulting does). Pod-level resources
// and in-place resize status are not read.
func ReadPods(t testing.TB, path string) []*guest.Pod {
	t.Helper()
	msgs, err := readPods(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*guest.Pod, len(msgs))
	for i, m := range msgs {
		out[i] = guest.NewPod(m)
	}
	return out
}

// ReadNodes reads every Node of a file, as ReadPods reads pods, and places
// pods on them: each pod whose spec.nodeName names one of the nodes is
// listed in that node's Pods, counted in its PodCount, and its requests are
// added to the node's Requested, as in the scheduler's snapshot. It fails t
// on anything but Nodes, and on a pod placed on a node the file does not
// hold.
//
// The conversion reads name, labels, annotations, taints, unschedulable,
// conditions, capacity and allocatable (capacity when absent, as the API
// server defaults it). Every node is at generation 0; Requested counts the
// pods placed on the node under "pods", as the host does.
func ReadNodes(t testing.TB, path string, pods ...*guest.Pod) []*guest.NodeInfo {
	t.Helper()
	msgs, err := readNodes(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := place(msgs, pods); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := make([]*guest.NodeInfo, len(msgs))
	for i, m := range msgs {
		out[i] = guest.NewNodeInfo(m)
	}
	return out
}

// ReadSettings returns the contents of a settings file (a policy's
// testdata/settings.json, which `wasmsched eval --config` reads too), for
// Load. It fails t if the file cannot be read.
func ReadSettings(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// place lists pods on the nodes they name and adds up their requests.
func place(nodes []*abiv1.NodeInfo, pods []*guest.Pod) error {
	byName := make(map[string]*abiv1.NodeInfo, len(nodes))
	requested := make(map[string]map[string]int64, len(nodes))
	for _, n := range nodes {
		byName[n.Node.Name] = n
	}
	for _, p := range pods {
		m := p.Message()
		if m.GetNodeName() == "" {
			continue
		}
		n, ok := byName[m.NodeName]
		if !ok {
			return fmt.Errorf("pod %s is on node %s, which is not there", p.Key(), m.NodeName)
		}
		n.PodCount++
		n.Pods = append(n.Pods, &abiv1.PodSummary{
			Name: m.Name, Namespace: m.Namespace, Uid: m.Uid, Labels: m.Labels,
			Requests: m.Requests, Priority: m.Priority, Owner: m.Owner,
		})
		if requested[n.Node.Name] == nil {
			requested[n.Node.Name] = map[string]int64{}
		}
		sum := requested[n.Node.Name]
		for _, name := range []string{guest.ResourceCPU, guest.ResourceMemory, guest.ResourceEphemeralStorage} {
			sum[name] += guest.Quantity(m.Requests, name)
		}
		for _, s := range m.GetRequests().GetScalars() {
			sum[s.Name] += s.Value
		}
	}
	for _, n := range nodes {
		n.Requested = requestedOn(requested[n.Node.Name], int(n.PodCount))
		slices.SortFunc(n.Pods, func(a, b *abiv1.PodSummary) int {
			return strings.Compare(a.Namespace+"\x00"+a.Name+"\x00"+a.Uid, b.Namespace+"\x00"+b.Name+"\x00"+b.Uid)
		})
	}
	return nil
}

// kubeObject is the part of a Kubernetes object read here; encoding/json
// matches field names without regard to case, so few need tags.
type kubeObject struct {
	Kind     string
	Metadata struct {
		Name, Namespace, UID string
		Labels, Annotations  map[string]string
		OwnerReferences      []struct {
			Kind, Name, UID string
			Controller      *bool
		}
	}
	Spec   json.RawMessage
	Status json.RawMessage
}

type podSpec struct {
	NodeName, SchedulerName, PriorityClassName string
	Priority                                   *int32
	NodeSelector                               map[string]string
	Affinity                                   *struct {
		NodeAffinity *struct {
			Required *struct {
				NodeSelectorTerms []selectorTerm
			} `json:"requiredDuringSchedulingIgnoredDuringExecution"`
			Preferred []struct {
				Weight     int32
				Preference selectorTerm
			} `json:"preferredDuringSchedulingIgnoredDuringExecution"`
		}
	}
	Tolerations []struct {
		Key, Operator, Value, Effect string
		TolerationSeconds            *int64
	}
	TopologySpreadConstraints []struct {
		MaxSkew                              int32
		TopologyKey, WhenUnsatisfiable       string
		LabelSelector                        *labelSelector
		MinDomains                           *int32
		MatchLabelKeys                       []string
		NodeAffinityPolicy, NodeTaintsPolicy *string
	}
	Containers, InitContainers []struct {
		RestartPolicy string
		Resources     struct{ Requests, Limits map[string]quantity }
	}
	Overhead        map[string]quantity
	SchedulingGroup *struct{ PodGroupName string }
}

type podStatus struct{ NominatedNodeName string }

type selectorTerm struct{ MatchExpressions, MatchFields []requirement }

type requirement struct {
	Key, Operator string
	Values        []string
}

type labelSelector struct {
	MatchLabels      map[string]string
	MatchExpressions []requirement
}

type nodeSpec struct {
	Unschedulable bool
	Taints        []struct{ Key, Value, Effect string }
}

type nodeStatus struct {
	Capacity, Allocatable map[string]quantity
	Conditions            []struct{ Type, Status, Reason string }
}

// quantity is a Kubernetes resource quantity, written as a string or a
// number.
type quantity string

func (q *quantity) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*q = quantity(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("quantity %s: want a string or a number", b)
	}
	*q = quantity(n)
	return nil
}

func readPods(path string) ([]*abiv1.Pod, error) {
	objs, err := readObjects(path, "Pod")
	if err != nil {
		return nil, err
	}
	out := make([]*abiv1.Pod, 0, len(objs))
	for _, o := range objs {
		p, err := podMessage(o.obj)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %v", path, o.where, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func readNodes(path string) ([]*abiv1.NodeInfo, error) {
	objs, err := readObjects(path, "Node")
	if err != nil {
		return nil, err
	}
	out := make([]*abiv1.NodeInfo, 0, len(objs))
	for _, o := range objs {
		n, err := nodeMessage(o.obj)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %v", path, o.where, err)
		}
		out = append(out, n)
	}
	return out, nil
}

func podMessage(o *kubeObject) (*abiv1.Pod, error) {
	md := &o.Metadata
	if md.Name == "" {
		return nil, errors.New("pod has no metadata.name")
	}
	if err := checkMeta("Pod", md.Name, md.Namespace, md.Labels, md.Annotations); err != nil {
		return nil, err
	}
	var spec podSpec
	var status podStatus
	if err := unmarshal(o.Spec, &spec); err != nil {
		return nil, fmt.Errorf("spec: %v", err)
	}
	if err := unmarshal(o.Status, &status); err != nil {
		return nil, fmt.Errorf("status: %v", err)
	}
	m := &abiv1.Pod{
		Name:              md.Name,
		Namespace:         md.Namespace,
		Uid:               md.UID,
		Labels:            KeyValues(md.Labels),
		Annotations:       KeyValues(md.Annotations),
		PriorityClassName: spec.PriorityClassName,
		SchedulerName:     spec.SchedulerName,
		NodeSelector:      KeyValues(spec.NodeSelector),
		NodeName:          spec.NodeName,
		NominatedNodeName: status.NominatedNodeName,
	}
	if g := spec.SchedulingGroup; g != nil {
		m.PodGroup = g.PodGroupName
	}
	if m.Namespace == "" {
		m.Namespace = "default"
	}
	if m.SchedulerName == "" {
		m.SchedulerName = "default-scheduler" // the API server's default
	}
	if m.Uid == "" {
		m.Uid = "uid-" + m.Namespace + "-" + m.Name
	}
	if spec.Priority != nil {
		m.Priority = *spec.Priority
	}
	for i, ref := range md.OwnerReferences {
		if i == 0 || (ref.Controller != nil && *ref.Controller) {
			m.Owner = &abiv1.OwnerReference{Kind: ref.Kind, Name: ref.Name, Uid: ref.UID}
			if ref.Controller != nil && *ref.Controller {
				break
			}
		}
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil {
		if r := a.NodeAffinity.Required; r != nil {
			for _, term := range r.NodeSelectorTerms {
				m.RequiredNodeAffinity = append(m.RequiredNodeAffinity, term.message())
			}
		}
		for _, p := range a.NodeAffinity.Preferred {
			m.PreferredNodeAffinity = append(m.PreferredNodeAffinity, &abiv1.PreferredSchedulingTerm{Weight: p.Weight, Preference: p.Preference.message()})
		}
	}
	for _, t := range spec.Tolerations {
		op := t.Operator
		if op == "" {
			op = "Equal" // what Kubernetes means by it, as the host writes it
		}
		m.Tolerations = append(m.Tolerations, &abiv1.Toleration{Key: t.Key, Operator: op, Value: t.Value, Effect: t.Effect, TolerationSeconds: t.TolerationSeconds})
	}
	for _, c := range spec.TopologySpreadConstraints {
		tc := &abiv1.TopologySpreadConstraint{
			MaxSkew: c.MaxSkew, TopologyKey: c.TopologyKey, WhenUnsatisfiable: c.WhenUnsatisfiable,
			MinDomains: c.MinDomains, MatchLabelKeys: c.MatchLabelKeys,
		}
		if c.LabelSelector != nil {
			tc.LabelSelector = c.LabelSelector.message()
		}
		if c.NodeAffinityPolicy != nil {
			tc.NodeAffinityPolicy = *c.NodeAffinityPolicy
		}
		if c.NodeTaintsPolicy != nil {
			tc.NodeTaintsPolicy = *c.NodeTaintsPolicy
		}
		m.TopologySpreadConstraints = append(m.TopologySpreadConstraints, tc)
	}
	req, err := spec.requests()
	if err != nil {
		return nil, err
	}
	m.Requests = Resources(req)
	return m, nil
}

// requests computes the pod's effective requests as the scheduler does
// (k8s.io/component-helpers/resource.PodRequests without pod-level
// resources): app containers and restartable (sidecar) init containers add
// up; each other init container needs its request plus the sidecars started
// before it; the pod needs the larger of the two, plus its overhead.
func (s *podSpec) requests() (map[string]int64, error) {
	sum := map[string]int64{}
	for _, c := range s.Containers {
		if err := addRequests(sum, c.Resources.Requests, c.Resources.Limits); err != nil {
			return nil, err
		}
	}
	initMax, sidecars := map[string]int64{}, map[string]int64{}
	for _, c := range s.InitContainers {
		own := map[string]int64{}
		if err := addRequests(own, c.Resources.Requests, c.Resources.Limits); err != nil {
			return nil, err
		}
		need := map[string]int64{}
		if c.RestartPolicy == "Always" {
			for k, v := range own {
				sum[k] += v
				sidecars[k] += v
			}
			for k, v := range sidecars {
				need[k] = v
			}
		} else {
			for k, v := range sidecars {
				need[k] = v
			}
			for k, v := range own {
				need[k] += v
			}
		}
		for k, v := range need {
			initMax[k] = max(initMax[k], v)
		}
	}
	for k, v := range initMax {
		sum[k] = max(sum[k], v)
	}
	if err := addRequests(sum, s.Overhead, nil); err != nil {
		return nil, err
	}
	return sum, nil
}

// addRequests adds a container's requests to sum, its limits standing in
// for the requests it does not set.
func addRequests(sum map[string]int64, requests, limits map[string]quantity) error {
	for name, q := range requests {
		v, err := amount(name, q)
		if err != nil {
			return err
		}
		sum[name] += v
	}
	for name, q := range limits {
		if _, ok := requests[name]; ok {
			continue
		}
		v, err := amount(name, q)
		if err != nil {
			return err
		}
		sum[name] += v
	}
	return nil
}

func nodeMessage(o *kubeObject) (*abiv1.NodeInfo, error) {
	md := &o.Metadata
	if md.Name == "" {
		return nil, errors.New("node has no metadata.name")
	}
	if err := checkMeta("Node", md.Name, "", md.Labels, md.Annotations); err != nil {
		return nil, err
	}
	var spec nodeSpec
	var status nodeStatus
	if err := unmarshal(o.Spec, &spec); err != nil {
		return nil, fmt.Errorf("spec: %v", err)
	}
	if err := unmarshal(o.Status, &status); err != nil {
		return nil, fmt.Errorf("status: %v", err)
	}
	n := &abiv1.Node{
		Name:          md.Name,
		Labels:        KeyValues(md.Labels),
		Annotations:   KeyValues(md.Annotations),
		Unschedulable: spec.Unschedulable,
	}
	for _, t := range spec.Taints {
		n.Taints = append(n.Taints, &abiv1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	for _, c := range status.Conditions {
		n.Conditions = append(n.Conditions, &abiv1.NodeCondition{Type: c.Type, Status: c.Status, Reason: c.Reason})
	}
	alloc := status.Allocatable
	if alloc == nil {
		alloc = status.Capacity
	}
	var err error
	if n.Capacity, err = nodeResources(status.Capacity); err != nil {
		return nil, fmt.Errorf("capacity: %v", err)
	}
	if n.Allocatable, err = nodeResources(alloc); err != nil {
		return nil, fmt.Errorf("allocatable: %v", err)
	}
	return &abiv1.NodeInfo{Node: n}, nil
}

// nodeResources converts a node's capacity or allocatable; unlike requests
// (Resources), zero amounts are kept, as the host keeps them.
func nodeResources(qs map[string]quantity) (*abiv1.Resources, error) {
	if qs == nil {
		return nil, nil
	}
	r := &abiv1.Resources{}
	for name, q := range qs {
		v, err := amount(name, q)
		if err != nil {
			return nil, err
		}
		setAmount(r, name, v)
	}
	slices.SortFunc(r.Scalars, func(a, b *abiv1.Scalar) int { return strings.Compare(a.Name, b.Name) })
	return r, nil
}

func (t selectorTerm) message() *abiv1.NodeSelectorTerm {
	return &abiv1.NodeSelectorTerm{MatchExpressions: requirements(t.MatchExpressions), MatchFields: requirements(t.MatchFields)}
}

func (s *labelSelector) message() *abiv1.LabelSelector {
	return &abiv1.LabelSelector{MatchLabels: KeyValues(s.MatchLabels), MatchExpressions: requirements(s.MatchExpressions)}
}

func requirements(rs []requirement) []*abiv1.Requirement {
	var out []*abiv1.Requirement
	for _, r := range rs {
		out = append(out, &abiv1.Requirement{Key: r.Key, Operator: r.Operator, Values: r.Values})
	}
	return out
}

func unmarshal(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return json.Unmarshal(raw, v)
}

// document is one object of a file, and where it was.
type document struct {
	where string
	obj   *kubeObject
}

// readObjects reads the objects of the wanted kind from a file of YAML
// (or JSON) documents, unpacking Lists, as `wasmsched eval` reads them.
func readObjects(path, kind string) ([]document, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []document
	for doc := 1; ; doc++ {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: not valid YAML: %v", path, doc, err)
		}
		if v == nil {
			continue // empty, or only comments
		}
		js, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: not a Kubernetes object: %v", path, doc, err)
		}
		var head struct {
			Kind  string
			Items []json.RawMessage
		}
		if err := json.Unmarshal(js, &head); err != nil {
			return nil, fmt.Errorf("%s: document %d: not a Kubernetes object: %v", path, doc, err)
		}
		where := fmt.Sprintf("document %d", doc)
		add := func(where string, raw []byte) error {
			var o kubeObject
			if err := json.Unmarshal(raw, &o); err != nil {
				return fmt.Errorf("%s: %s: not a Kubernetes object: %v", path, where, err)
			}
			if o.Kind != kind {
				got := o.Kind
				if got == "" {
					got = "an object without kind"
				}
				return fmt.Errorf("%s: %s is %s, want %s", path, where, got, kind)
			}
			out = append(out, document{where: where, obj: &o})
			return nil
		}
		if !strings.HasSuffix(head.Kind, "List") {
			if err := add(where, js); err != nil {
				return nil, err
			}
			continue
		}
		for i, item := range head.Items {
			if err := add(fmt.Sprintf("%s item %d", where, i+1), item); err != nil {
				return nil, err
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no %s found", path, kind)
	}
	return out, nil
}
