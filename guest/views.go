package guest

import (
	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// Well-known label keys.
const (
	LabelZone     = "topology.kubernetes.io/zone"
	LabelRegion   = "topology.kubernetes.io/region"
	LabelHostname = "kubernetes.io/hostname"
)

// Resource names with a dedicated field; every other name is a scalar
// (extended resources such as nvidia.com/gpu, hugepages-2Mi, ...).
const (
	ResourceCPU              = "cpu"
	ResourceMemory           = "memory"
	ResourceEphemeralStorage = "ephemeral-storage"
	ResourcePods             = "pods"
)

// Quantity returns the amount of the named resource in r, in canonical
// units: milli-CPU for "cpu", bytes for memory and storage, counts for
// everything else. A nil r or an absent resource is 0.
func Quantity(r *abiv1.Resources, name string) int64 {
	if r == nil {
		return 0
	}
	switch name {
	case ResourceCPU:
		return r.MilliCpu
	case ResourceMemory:
		return r.Memory
	case ResourceEphemeralStorage:
		return r.EphemeralStorage
	case ResourcePods:
		return r.Pods
	}
	// A binary search written out: a closure call per step (sort.Search)
	// is dear in Go compiled to WebAssembly, and this runs once per node.
	s := r.Scalars
	lo, hi := 0, len(s)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if s[mid].Name < name {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(s) && s[lo].Name == name {
		return s[lo].Value
	}
	// The host sends scalars sorted; tolerate hand-built messages too.
	for _, sc := range s {
		if sc.Name == name {
			return sc.Value
		}
	}
	return 0
}

// Lookup returns the value for key in a KeyValue list (labels, annotations,
// selectors), which the host sends sorted by key.
func Lookup(list []*abiv1.KeyValue, key string) (string, bool) {
	lo, hi := 0, len(list)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if list[mid].Key < key {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(list) && list[lo].Key == key {
		return list[lo].Value, true
	}
	// Tolerate hand-built, unsorted lists.
	for _, kv := range list {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return "", false
}

// Pod is the pod being scheduled, read through its methods. Lists it
// returns (labels, tolerations, ...) are the message's own: read them, never
// modify them. Message gives the whole message, for fields without a method.
//
// The SDK makes the Pod of each cycle; NewPod wraps a message in tests.
type Pod struct{ msg *abiv1.Pod }

// NewPod wraps a pod message, as the host sends it, in a view. The view
// reads m; m must not change afterwards.
func NewPod(m *abiv1.Pod) *Pod { return &Pod{msg: m} }

// Message returns the pod's wire message (abi/v1), for what the methods do
// not cover. It is read-only, like the view.
func (p *Pod) Message() *abiv1.Pod { return p.msg }

// Name returns the pod's name.
func (p *Pod) Name() string { return p.msg.GetName() }

// Namespace returns the pod's namespace.
func (p *Pod) Namespace() string { return p.msg.GetNamespace() }

// UID returns the pod's UID, which WaitingPodAction names.
func (p *Pod) UID() string { return p.msg.GetUid() }

// Key returns "namespace/name".
func (p *Pod) Key() string { return p.msg.GetNamespace() + "/" + p.msg.GetName() }

// Label returns the value of a label and whether it is set.
func (p *Pod) Label(key string) (string, bool) { return Lookup(p.msg.GetLabels(), key) }

// Labels returns the pod's labels, sorted by key (for MatchSelector).
func (p *Pod) Labels() []*abiv1.KeyValue { return p.msg.GetLabels() }

// Annotation returns the value of an annotation and whether it is set.
func (p *Pod) Annotation(key string) (string, bool) { return Lookup(p.msg.GetAnnotations(), key) }

// Request returns the pod's effective request of a resource (see Quantity
// for units), computed as the scheduler computes it.
func (p *Pod) Request(name string) int64 { return Quantity(p.msg.GetRequests(), name) }

// Priority returns the pod's priority (0 when it has none).
func (p *Pod) Priority() int32 { return p.msg.GetPriority() }

// PriorityClassName returns the name of the pod's priority class.
func (p *Pod) PriorityClassName() string { return p.msg.GetPriorityClassName() }

// Owner returns the pod's controller (else its first owner), or nil.
func (p *Pod) Owner() *abiv1.OwnerReference { return p.msg.GetOwner() }

// NodeSelector returns the pod's nodeSelector, sorted by key. Use
// NodeInfo.MatchesNodeSelector to evaluate it.
func (p *Pod) NodeSelector() []*abiv1.KeyValue { return p.msg.GetNodeSelector() }

// RequiredNodeAffinity returns the terms of the pod's required node
// affinity (any one must match). Use NodeInfo.MatchesNodeSelector to
// evaluate them.
func (p *Pod) RequiredNodeAffinity() []*abiv1.NodeSelectorTerm {
	return p.msg.GetRequiredNodeAffinity()
}

// Tolerations returns the pod's tolerations. An empty operator arrives as
// "Equal".
func (p *Pod) Tolerations() []*abiv1.Toleration { return p.msg.GetTolerations() }

// Tolerates reports whether one of the pod's tolerations tolerates the taint.
func (p *Pod) Tolerates(t *abiv1.Taint) bool {
	for _, tol := range p.msg.GetTolerations() {
		if Tolerates(tol, t) {
			return true
		}
	}
	return false
}

// FirstUntolerated returns the first taint among taints with one of the given
// effects (all effects when none are given) that the pod does not tolerate,
// or nil.
func (p *Pod) FirstUntolerated(taints []*abiv1.Taint, effects ...string) *abiv1.Taint {
	for _, t := range taints {
		if len(effects) > 0 && !contains(effects, t.GetEffect()) {
			continue
		}
		if !p.Tolerates(t) {
			return t
		}
	}
	return nil
}

// Tolerates applies the Kubernetes toleration rules to one taint.
func Tolerates(tol *abiv1.Toleration, t *abiv1.Taint) bool {
	if tol.GetEffect() != "" && tol.GetEffect() != t.GetEffect() {
		return false
	}
	if tol.GetKey() == "" {
		return tol.GetOperator() == "Exists"
	}
	if tol.GetKey() != t.GetKey() {
		return false
	}
	switch tol.GetOperator() {
	case "", "Equal":
		return tol.GetValue() == t.GetValue()
	case "Exists":
		return true
	}
	return false
}

// NodeInfo is a node as the scheduler knows it: the object, the resources
// requested by the pods on it (assumed pods included), and, for policies
// that set Policy.WantsPods, those pods. It is read through its methods,
// which read a flat copy of its resource amounts and labels taken when the
// node arrived (see RATIONALE.md); Message gives the whole message, for
// fields without a method. It is read-only.
//
// The SDK makes the NodeInfo of each node the host syncs; NewNodeInfo wraps
// a message in tests.
type NodeInfo struct {
	// msg is the decoded message: a resident node's is decoded from raw
	// (and usage) the first time a method needs it, unless the policy
	// wants pods or all nodes, whose nodes keep it from the sync on.
	msg *abiv1.NodeInfo
	// raw is the node's encoding as the host sent it, and usage that of
	// the last NodeUsage applied since (nil when none).
	raw, usage []byte
	index      nodeIndex
	// handle is the host's handle of the node (NodeInfo.handle).
	handle int32
}

// NewNodeInfo wraps a node message, as the host sends it, in a view with
// the same flat copy of its amounts and labels that a synced node gets.
// The view reads m; m must not change afterwards.
func NewNodeInfo(m *abiv1.NodeInfo) *NodeInfo { return newNodeInfo(m, nil, true) }

// Message returns the node's wire message (abi/v1), for what the methods
// do not cover. It is read-only, like the view: the methods do not see
// changes made to it. For a resident node the SDK decodes the message on
// the first call and keeps it with the view; policies that read only
// through the methods never pay for it.
func (n *NodeInfo) Message() *abiv1.NodeInfo {
	if n.msg == nil && n.raw != nil {
		n.msg = decodeNode(n.raw, n.usage)
	}
	return n.msg
}

// decodeNode decodes a node's encoding and applies the usage update whose
// encoding is usage, if any. Both decoded once already, at the sync.
func decodeNode(raw, usage []byte) *abiv1.NodeInfo {
	m := &abiv1.NodeInfo{}
	if err := m.UnmarshalVT(raw); err != nil {
		return m
	}
	if usage == nil {
		return m
	}
	var u abiv1.NodeUsage
	if err := u.UnmarshalVT(usage); err != nil {
		return m
	}
	return usageMessage(m, &u)
}

// Name returns the node's name.
func (n *NodeInfo) Name() string {
	if !n.index.built {
		return n.Message().GetNode().GetName()
	}
	return n.index.str(n.index.name)
}

// Generation returns the scheduler's generation of the node: it changes
// whenever what the policy can read of the node changes (for a policy
// that wants pods, with every change of the node or of its pods), so a
// policy may keep what it computed for one generation of a node.
func (n *NodeInfo) Generation() int64 {
	if !n.index.built {
		return n.Message().GetGeneration()
	}
	return n.index.generation
}

// SameObject reports whether m is a view of the same node object as n:
// the same node, as the host last sent it whole, so that m's labels,
// annotations, taints, conditions and allocatable amounts are n's. Views
// that differ only in usage (the requests and pods on the node, a pod bound
// or removed) are of the same object; a node the API server updated, or
// one removed and added again, is not. It can answer false for equal
// objects (the host resends the whole node for a policy that wants pods,
// at each change of them), never true for different ones, so a policy may
// keep what it derived from a node's labels for as long as it answers true.
func (n *NodeInfo) SameObject(m *NodeInfo) bool {
	switch {
	case n == nil || m == nil || n.handle != m.handle:
		return false
	case n == m:
		return true
	case len(n.raw) > 0:
		return len(m.raw) == len(n.raw) && &m.raw[0] == &n.raw[0]
	}
	// Views of messages (NewNodeInfo): the same node message.
	node := n.msg.GetNode()
	return n.raw == nil && m.raw == nil && node != nil && m.msg.GetNode() == node
}

// Label returns the value of a node label and whether it is set.
func (n *NodeInfo) Label(key string) (string, bool) { return n.label(key) }

// Labels returns the node's labels, sorted by key (for MatchSelector).
func (n *NodeInfo) Labels() []*abiv1.KeyValue { return n.Message().GetNode().GetLabels() }

// Annotation returns the value of a node annotation and whether it is set.
func (n *NodeInfo) Annotation(key string) (string, bool) {
	return Lookup(n.Message().GetNode().GetAnnotations(), key)
}

// Zone returns the node's topology.kubernetes.io/zone label, or "".
func (n *NodeInfo) Zone() string {
	v, _ := n.Label(LabelZone)
	return v
}

// Allocatable returns the node's allocatable amount of a resource.
func (n *NodeInfo) Allocatable(name string) int64 {
	alloc, _ := n.amounts(name)
	return alloc
}

// Capacity returns the node's capacity of a resource (allocatable plus
// what the node reserves for the system).
func (n *NodeInfo) Capacity(name string) int64 {
	return Quantity(n.Message().GetNode().GetCapacity(), name)
}

// Requested returns the amount of a resource requested by the pods on the
// node, assumed pods included. Requested(ResourcePods) is the number of
// pods, so that Free(ResourcePods) is the room left.
func (n *NodeInfo) Requested(name string) int64 {
	_, req := n.amounts(name)
	return req
}

// Free returns allocatable minus requested for a resource. It can be
// negative when a node shrank under its pods.
func (n *NodeInfo) Free(name string) int64 {
	alloc, req := n.amounts(name)
	return alloc - req
}

// PodCount returns the number of pods on the node, assumed pods included,
// whether or not the policy sets Policy.WantsPods.
func (n *NodeInfo) PodCount() int {
	if !n.index.built {
		return int(n.Message().GetPodCount())
	}
	return int(n.index.podCount)
}

// Pods returns the pods on the node, sorted by namespace, name and UID;
// empty unless Policy.WantsPods is set.
func (n *NodeInfo) Pods() []*abiv1.PodSummary { return n.Message().GetPods() }

// Taints returns the node's taints.
func (n *NodeInfo) Taints() []*abiv1.Taint { return n.Message().GetNode().GetTaints() }

// Unschedulable reports whether the node is cordoned (spec.unschedulable).
func (n *NodeInfo) Unschedulable() bool { return n.Message().GetNode().GetUnschedulable() }

// Condition returns the status of the node condition of that type
// ("Ready": "True", "False" or "Unknown") and whether the node reports it.
func (n *NodeInfo) Condition(typ string) (string, bool) {
	for _, c := range n.Message().GetNode().GetConditions() {
		if c.GetType() == typ {
			return c.GetStatus(), true
		}
	}
	return "", false
}

// MatchesNodeSelector reports whether the node satisfies the pod's
// nodeSelector and required node affinity, as the NodeAffinity plugin does.
func (n *NodeInfo) MatchesNodeSelector(p *Pod) bool {
	for _, kv := range p.msg.GetNodeSelector() {
		if lv, ok := n.label(kv.Key); !ok || lv != kv.Value {
			return false
		}
	}
	terms := p.msg.GetRequiredNodeAffinity()
	if len(terms) == 0 {
		return true
	}
	for _, t := range terms {
		if n.matchesTerm(t) {
			return true
		}
	}
	return false
}

func (n *NodeInfo) matchesTerm(t *abiv1.NodeSelectorTerm) bool {
	if len(t.GetMatchExpressions()) == 0 && len(t.GetMatchFields()) == 0 {
		return false
	}
	for _, r := range t.GetMatchExpressions() {
		v, ok := n.label(r.GetKey())
		if !matchRequirement(r, v, ok) {
			return false
		}
	}
	for _, r := range t.GetMatchFields() {
		if r.GetKey() != "metadata.name" || !matchRequirement(r, n.Name(), true) {
			return false
		}
	}
	return true
}

// MatchRequirement evaluates one selector requirement against labels.
func MatchRequirement(r *abiv1.Requirement, labels []*abiv1.KeyValue) bool {
	v, ok := Lookup(labels, r.GetKey())
	return matchRequirement(r, v, ok)
}

// matchRequirement evaluates one selector requirement against the value of
// its key (ok: the key is set).
func matchRequirement(r *abiv1.Requirement, v string, ok bool) bool {
	switch r.GetOperator() {
	case "In":
		return ok && contains(r.GetValues(), v)
	case "NotIn":
		return !ok || !contains(r.GetValues(), v)
	case "Exists":
		return ok
	case "DoesNotExist":
		return !ok
	case "Gt", "Lt":
		if !ok || len(r.GetValues()) != 1 {
			return false
		}
		have, err1 := parseInt(v)
		want, err2 := parseInt(r.GetValues()[0])
		if err1 || err2 {
			return false
		}
		if r.GetOperator() == "Gt" {
			return have > want
		}
		return have < want
	}
	return false
}

// MatchSelector reports whether labels satisfy a label selector. A nil
// selector matches nothing, as in Kubernetes.
func MatchSelector(s *abiv1.LabelSelector, labels []*abiv1.KeyValue) bool {
	if s == nil {
		return false
	}
	for _, kv := range s.GetMatchLabels() {
		if lv, ok := Lookup(labels, kv.Key); !ok || lv != kv.Value {
			return false
		}
	}
	for _, r := range s.GetMatchExpressions() {
		if !MatchRequirement(r, labels) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// parseInt parses a decimal int64 without strconv's error allocations; bad
// reports a malformed or out-of-range number.
func parseInt(s string) (v int64, bad bool) {
	if s == "" {
		return 0, true
	}
	neg := s[0] == '-'
	if neg || s[0] == '+' {
		s = s[1:]
		if s == "" {
			return 0, true
		}
	}
	// Accumulate as a negative number: its range is one larger.
	const minInt64 = -1 << 63
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, true
		}
		d := int64(c - '0')
		if v < (minInt64+d)/10 {
			return 0, true
		}
		v = v*10 - d
	}
	if !neg {
		if v == minInt64 {
			return 0, true
		}
		v = -v
	}
	return v, false
}

// ParseInt parses a decimal integer, for annotations and labels that carry
// numbers ("gpu.wasmsched.io/min-memory-mib": "40960").
func ParseInt(s string) (int64, bool) {
	v, bad := parseInt(s)
	return v, !bad
}
