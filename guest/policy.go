package guest

import (
	"time"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// ABIVersion is the version of the host ABI this SDK implements.
const ABIVersion = 1

// Policy is what a policy author registers. Every function is optional; the
// host only calls the extension points whose function is set, and a point
// that no policy implements costs the scheduler nothing.
type Policy struct {
	// Name is the policy's own name, for its authors and tests. The
	// scheduler's logs, events and metrics use the name the operator gives
	// the policy in the scheduler configuration.
	Name string

	// Settings receives the operator's settings (JSON; empty when none) once
	// per instance, before any other call. Returning an error rejects the
	// policy at load time with that error. ParseSettings helps.
	Settings func(raw []byte) error

	// WantsPods asks the host to send, with every node, a summary of the
	// pods on it (NodeInfo.Pods). Leave it false when the policy needs only
	// the node and its resource totals: syncing is cheaper.
	WantsPods bool

	// WantsAllNodes asks the host to bring the whole snapshot up to date
	// before each cycle, for policies that read other nodes than the one a
	// call names (counting pods per zone, ...). Without it a node's data is
	// only guaranteed current in calls that name it.
	WantsAllNodes bool

	// PreFilter runs once per cycle on each instance that takes part in
	// it, before any other call of the cycle. It may reject the pod
	// outright, narrow the candidate nodes with Cycle.RestrictNodes, keep
	// per-cycle state in Cycle.State, or return SkipPoint to skip Filter.
	PreFilter func(c *Cycle) Status

	// Filter decides whether the pod may run on a node.
	Filter func(c *Cycle, n *NodeInfo) Status

	// Score ranks a node that passed Filter. Raw scores must fit in an int32;
	// unless NormalizeScore is set they must lie in 0..100.
	Score func(c *Cycle, n *NodeInfo) (int64, Status)

	// NormalizeScore rewrites the raw scores of all feasible nodes in place,
	// into 0..100. MinMaxNormalize is a ready implementation.
	NormalizeScore func(c *Cycle, scores []NodeScore) Status

	// PostFilter runs when no node passed Filter. It may nominate a node.
	PostFilter func(c *Cycle, statuses []NodeStatus) (nominated string, s Status)

	// Reserve and Unreserve bracket the time between choosing a node and
	// binding. Unreserve may reject other pods waiting at Permit (a gang
	// whose member failed releases the rest).
	Reserve   func(c *Cycle, n *NodeInfo) Status
	Unreserve func(c *Cycle, n *NodeInfo, waiting []WaitingPod) []WaitingPodAction

	// Permit lets the pod bind, rejects it, or parks it (Wait) until
	// allowed, rejected or timed out. It sees every pod waiting at Permit
	// and may allow or reject them too.
	Permit func(c *Cycle, n *NodeInfo, waiting []WaitingPod) PermitResult

	// PreBind runs before the binding is written; a failure aborts it.
	PreBind func(c *Cycle, n *NodeInfo) Status

	// PostBind is informational and runs after a successful binding.
	PostBind func(c *Cycle, n *NodeInfo)

	// Context lists the kinds of cluster object the policy reads
	// (Cycle.Objects, Cycle.Object and the typed views). The scheduler
	// refuses the policy unless the operator allows every kind listed.
	Context []Kind

	// NamespaceUsage asks for the resources requested per namespace
	// (Cycle.TenantUsage with an empty key), UsageLabelKeys for those
	// requested per value of each pod label key. The host counts bound
	// and assumed pods and leaves terminated ones out.
	NamespaceUsage bool
	UsageLabelKeys []string

	// AddPod and RemovePod follow the scheduler's simulations (preemption,
	// nominated pods): for a Filter on a node the scheduler modified, the
	// SDK runs PreFilter again for a fresh Cycle.State (its verdict is not
	// used), calls AddPod or RemovePod for each pod added to or removed
	// from the node, in order, then Filter; the cycle's State is restored
	// afterwards. Without them, Filter sees only the node as modified.
	AddPod    func(c *Cycle, pod *abiv1.PodSummary, n *NodeInfo) Status
	RemovePod func(c *Cycle, pod *abiv1.PodSummary, n *NodeInfo) Status

	// SelectVictims takes part in preemption: given the pods on a node, it
	// returns the UIDs of those to evict so that the cycle's pod fits, the
	// most expendable first, or a rejection when evicting cannot help on
	// this node. The host checks the pod then fits (every Filter plugin,
	// with RemovePod for each victim) and puts back, from the end of the
	// list, every victim the pod fits without.
	SelectVictims func(c *Cycle, n *NodeInfo, pods []*abiv1.PodSummary) (victims []string, s Status)

	// Signature declares what of the pod PreFilter, Filter, PreScore and
	// Score read, so that the scheduler may reuse one pod's results for the
	// next pod equal in all of it (opportunistic batching). The host then
	// sends the policy only the declared parts of every pod: reading
	// anything else finds it empty. Nil, and without Sign, the policy's
	// pods are never batched.
	Signature *Signature

	// Sign computes a pod's signature itself, for policies whose verdicts
	// depend on the pod in ways a Signature cannot list (a label only when
	// another is absent, ...). It receives the whole pod and returns the
	// bytes that must be equal for pods the policy judges alike, or false
	// when the pod must not be batched. A policy with Sign receives whole
	// pods; Signature is then ignored.
	Sign func(pod *Pod) (signature []byte, ok bool)

	// Requeue declares the cluster events that can turn a rejection by this
	// policy into a fit; the scheduler retries the pods it rejected only on
	// those. Nil, every event the host watches retries them.
	Requeue *Requeue

	// WantsPodGroups asks the host to send, with the pod of every cycle,
	// the PodGroup it belongs to (Cycle.PodGroup), with its members'
	// counts. The scheduler knows pod groups from Kubernetes 1.36 on, with
	// workload-aware scheduling enabled (gate GenericWorkload).
	WantsPodGroups bool

	// PlacementGenerate proposes where a pod group may be placed as a
	// whole: placements, sets of nodes taken from parent (all nodes, or
	// an enclosing placement), one per rack or NVLink domain for instance.
	// The scheduler tries the group on each and keeps the best by
	// PlacementScore. No placement, with an Unschedulable status and its
	// reasons, leaves the group's pods pending with them. Called once per
	// pod-group cycle, outside any pod's cycle; the nodes of parent are
	// current. Kubernetes 1.36 and later, gate
	// TopologyAwareWorkloadScheduling.
	PlacementGenerate func(g *Group, parent Placement) ([]Placement, Status)

	// PlacementScore scores a feasible placement: the node each pod of the
	// group would run on. Higher is better.
	PlacementScore func(g *Group, p *PlacementAssignment) (int64, Status)

	// NormalizePlacementScore rewrites, in place, the scores PlacementScore
	// gave the cycle's feasible placements.
	NormalizePlacementScore func(g *Group, scores []PlacementScore) Status

	// PodGroupPostFilter runs when a pod-group cycle found no placement
	// for the whole group. Unschedulable with reasons says why: the
	// scheduler shows them on every member, which stays pending.
	// UnschedulableAndUnresolvable also stops the scheduler's later
	// PodGroupPostFilter plugins (its group preemption among them).
	// Success says the group can be made to fit: the scheduler nominates
	// the members the nominations name and tries the group again. f holds
	// every node of the scheduler's snapshot, current. Kubernetes 1.37 and
	// later, gate GenericWorkload; the scheduler runs its own
	// PodGroupPostFilter plugins (preemption) first.
	PodGroupPostFilter func(g *Group, f *GroupFailure) ([]Nomination, Status)
}

// Kind names a kind of cluster object by API group, version and resource
// (the plural, lower-case name).
type Kind struct{ Group, Version, Resource string }

// The built-in kinds a policy may read (with the operator's consent).
var (
	KindNamespace     = Kind{Version: "v1", Resource: "namespaces"}
	KindPriorityClass = Kind{Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses"}
	KindResourceSlice = Kind{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices"}
	KindResourceClaim = Kind{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims"}
	KindDeviceClass   = Kind{Group: "resource.k8s.io", Version: "v1", Resource: "deviceclasses"}
)

// String returns group/version/resource, or version/resource for the core
// group: "v1/namespaces", "scheduling.x-k8s.io/v1alpha1/elasticquotas".
func (k Kind) String() string {
	if k.Group == "" {
		return k.Version + "/" + k.Resource
	}
	return k.Group + "/" + k.Version + "/" + k.Resource
}

// PermitResult is Permit's answer.
type PermitResult struct {
	Status Status
	// Timeout bounds a Wait; zero means the host's default.
	Timeout time.Duration
	// Actions allow or reject other waiting pods.
	Actions []WaitingPodAction
}

// WaitingPodAction allows (Allow true) or rejects the waiting pod with UID.
type WaitingPodAction struct {
	UID    string
	Allow  bool
	Reason string
}

// WaitingPod is a pod parked at Permit, read through its methods; Message
// gives the whole message. It is read-only. NewWaitingPod wraps a message in
// tests.
type WaitingPod struct{ msg *abiv1.WaitingPod }

// NewWaitingPod wraps a waiting pod's message, as the host sends it, in a
// view.
func NewWaitingPod(m *abiv1.WaitingPod) WaitingPod { return WaitingPod{msg: m} }

// Message returns the waiting pod's wire message (abi/v1). It is read-only.
func (w WaitingPod) Message() *abiv1.WaitingPod { return w.msg }

// Name returns the pod's name.
func (w WaitingPod) Name() string { return w.msg.GetName() }

// Namespace returns the pod's namespace.
func (w WaitingPod) Namespace() string { return w.msg.GetNamespace() }

// UID returns the pod's UID, which WaitingPodAction names.
func (w WaitingPod) UID() string { return w.msg.GetUid() }

// Key returns "namespace/name".
func (w WaitingPod) Key() string { return w.msg.GetNamespace() + "/" + w.msg.GetName() }

// Label returns the value of a label and whether it is set.
func (w WaitingPod) Label(key string) (string, bool) { return Lookup(w.msg.GetLabels(), key) }

// Labels returns the pod's labels, sorted by key (for MatchSelector).
func (w WaitingPod) Labels() []*abiv1.KeyValue { return w.msg.GetLabels() }

// Annotation returns the value of an annotation and whether it is set.
func (w WaitingPod) Annotation(key string) (string, bool) {
	return Lookup(w.msg.GetAnnotations(), key)
}

// NodeName returns the node the pod is reserved on while it waits.
func (w WaitingPod) NodeName() string { return w.msg.GetNodeName() }

// NodeScore is one node's score, for NormalizeScore.
type NodeScore struct {
	Node  *NodeInfo
	Score int64
}

// NodeStatus is one node's Filter verdict, for PostFilter.
type NodeStatus struct {
	Node   *NodeInfo
	Status Status
}

func (p *Policy) points() uint64 {
	var b uint64
	set := func(ok bool, pt abiv1.Point) {
		if ok {
			b |= 1 << uint(pt)
		}
	}
	set(p.PreFilter != nil, abiv1.Point_POINT_PRE_FILTER)
	set(p.Filter != nil, abiv1.Point_POINT_FILTER)
	set(p.PostFilter != nil, abiv1.Point_POINT_POST_FILTER)
	set(p.Score != nil, abiv1.Point_POINT_SCORE)
	set(p.NormalizeScore != nil, abiv1.Point_POINT_NORMALIZE_SCORE)
	set(p.Reserve != nil, abiv1.Point_POINT_RESERVE)
	set(p.Unreserve != nil, abiv1.Point_POINT_UNRESERVE)
	set(p.Permit != nil, abiv1.Point_POINT_PERMIT)
	set(p.PreBind != nil, abiv1.Point_POINT_PRE_BIND)
	set(p.PostBind != nil, abiv1.Point_POINT_POST_BIND)
	set(p.AddPod != nil || p.RemovePod != nil, abiv1.Point_POINT_POD_CHANGES)
	set(p.SelectVictims != nil, abiv1.Point_POINT_SELECT_VICTIMS)
	set(p.Sign != nil, abiv1.Point_POINT_SIGN)
	set(p.PlacementGenerate != nil, abiv1.Point_POINT_PLACEMENT_GENERATE)
	set(p.PlacementScore != nil, abiv1.Point_POINT_PLACEMENT_SCORE)
	set(p.NormalizePlacementScore != nil, abiv1.Point_POINT_NORMALIZE_PLACEMENT_SCORE)
	set(p.PodGroupPostFilter != nil, abiv1.Point_POINT_POD_GROUP_POST_FILTER)
	return b
}

var registered *Policy

// Register installs the policy. Call it exactly once, from an init function
// of package main: a reactor module never runs main.
func Register(p *Policy) {
	if registered != nil {
		panic("guest.Register called twice")
	}
	registered = p
	inst.policy = p
}

// MinMaxNormalize maps the raw scores linearly onto 0..100: the lowest raw
// score becomes 0 and the highest 100. When all scores are equal they become
// 100 if positive and 0 otherwise.
func MinMaxNormalize(_ *Cycle, scores []NodeScore) Status {
	if len(scores) == 0 {
		return OK()
	}
	lo, hi := scores[0].Score, scores[0].Score
	for _, s := range scores[1:] {
		lo = min(lo, s.Score)
		hi = max(hi, s.Score)
	}
	for i := range scores {
		switch {
		case hi == lo && hi > 0:
			scores[i].Score = 100
		case hi == lo:
			scores[i].Score = 0
		default:
			scores[i].Score = (scores[i].Score - lo) * 100 / (hi - lo)
		}
	}
	return OK()
}
