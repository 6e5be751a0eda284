package guest

import abiv1 "github.com/wasmsched/wasmsched/abi/v1"

// The pod fields a Signature may declare whole, by their names in the ABI's
// Pod message. A pod's name, UID and scheduler name are always sent;
// verdicts must not depend on the name or the UID.
const (
	PodNamespace                 = "namespace"
	PodOwner                     = "owner"
	PodPriority                  = "priority"
	PodPriorityClassName         = "priority_class_name"
	PodNodeSelector              = "node_selector"
	PodRequiredNodeAffinity      = "required_node_affinity"
	PodPreferredNodeAffinity     = "preferred_node_affinity"
	PodTolerations               = "tolerations"
	PodTopologySpreadConstraints = "topology_spread_constraints"
	PodRequests                  = "requests"
	PodLabels                    = "labels"
	PodAnnotations               = "annotations"
	PodNodeName                  = "node_name"
	PodNominatedNodeName         = "nominated_node_name"
	PodGroupField                = "pod_group"
)

// Signature lists what of the pod a policy's PreFilter, Filter, PreScore
// and Score read; a policy with none of them needs no Signature. Declare
// everything they read: the host sends nothing else, so an undeclared
// label reads as absent. Over-declaring is safe and only batches fewer
// pods together.
//
// Verdicts must also depend on nothing that placing an earlier pod of the
// same signature changes on other nodes than the one it lands on (counts
// per zone, spreading): the scheduler re-checks the node it reuses, not the
// others. A policy with such rules declares no Signature, or signs with
// Sign and refuses the pods they apply to.
type Signature struct {
	// Fields are whole fields of the pod: PodNamespace, PodRequests, ...
	Fields []string
	// LabelKeys, AnnotationKeys and Resources are single labels,
	// annotations and requests (by resource name: cpu, memory,
	// ephemeral-storage, pods, nvidia.com/gpu, ...).
	LabelKeys      []string
	AnnotationKeys []string
	Resources      []string
}

func (s *Signature) message() *abiv1.PodSignature {
	if s == nil {
		return nil
	}
	return &abiv1.PodSignature{
		Fields:         append([]string{}, s.Fields...),
		LabelKeys:      append([]string{}, s.LabelKeys...),
		AnnotationKeys: append([]string{}, s.AnnotationKeys...),
		Resources:      append([]string{}, s.Resources...),
	}
}

// Requeue lists the cluster events that can make a pod the policy rejected
// fit. The scheduler retries such a pod on those events only (and whenever
// the pod itself changes, or the policy is replaced). Leaving out an event
// that can help strands pods until the scheduler's periodic retry, minutes
// later: when in doubt, include it.
type Requeue struct {
	// NodeAdded: a node joins.
	NodeAdded bool
	// NodeLabelKeys: a node's label with one of these keys changes ("*":
	// any label).
	NodeLabelKeys []string
	// NodeAllocatable: a node's allocatable resources change.
	NodeAllocatable bool
	// NodeTaints: a node's taints or its unschedulable flag change.
	NodeTaints bool
	// NodeUpdated: any change of a node (annotations, conditions too).
	// A node joining counts whenever any Node field is set.
	NodeUpdated bool
	// PodDeleted: a matching pod leaves its node (deleted, or its requests
	// shrink). PodAdded: a matching pod is created or bound.
	PodDeleted *PodMatch
	PodAdded   *PodMatch
	// Objects: an object of a kind in Policy.Context changes.
	Objects bool
}

// PodMatch narrows pod events to pods related to the rejected one. The zero
// PodMatch matches every pod; otherwise a pod matches when it meets one of
// the conditions set.
type PodMatch struct {
	// SameNamespace: the pod is in the rejected pod's namespace.
	SameNamespace bool
	// SameLabelKeys: the pod has the rejected pod's value for one of these
	// label keys.
	SameLabelKeys []string
	// Resources: the pod requests one of these resources (cpu, memory,
	// ephemeral-storage, nvidia.com/gpu, ...).
	Resources []string
}

func (r *Requeue) message() *abiv1.Requeue {
	if r == nil {
		return nil
	}
	return &abiv1.Requeue{
		NodeAdded:       r.NodeAdded,
		NodeLabelKeys:   append([]string{}, r.NodeLabelKeys...),
		NodeAllocatable: r.NodeAllocatable,
		NodeTaints:      r.NodeTaints,
		PodDeleted:      r.PodDeleted.message(),
		PodAdded:        r.PodAdded.message(),
		Objects:         r.Objects,
		NodeUpdated:     r.NodeUpdated,
	}
}

func (m *PodMatch) message() *abiv1.PodMatch {
	if m == nil {
		return nil
	}
	return &abiv1.PodMatch{SameNamespace: m.SameNamespace, SameLabelKeys: append([]string{}, m.SameLabelKeys...), Resources: append([]string{}, m.Resources...)}
}

// sign handles wasmsched_call(POINT_SIGN). It needs no cycle: the host asks
// when a pod enters the scheduling queue.
func (in *instance) sign(n uint32) uint32 {
	if in.policy.Sign == nil {
		return in.fail(Error, "policy does not sign pods")
	}
	var req abiv1.SignRequest
	if err := in.decode(n, &req); err != nil {
		return in.fail(Error, "decode SignRequest: "+err.Error())
	}
	sig, ok := in.policy.Sign(&Pod{msg: req.Pod})
	if !ok {
		return in.fail(Unschedulable, "the policy does not sign this pod")
	}
	in.result = abiv1.Result{Code: abiv1.Code_CODE_SUCCESS, Signature: sig}
	in.pending = &in.result
	return uint32(Success)
}
