package convert

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// Pod converts a pod to the ABI Pod, with its effective requests computed by
// the scheduler's own PodInfo.CalculateResource, so they match what the
// scheduler charges to a node: the sum over app containers and restartable
// init containers, at least the largest init container, plus pod overhead,
// pod-level resources and in-place resize status as the feature gates of
// this process say.
//
// Requests are read from spec.containers[*].resources.requests only. Limits
// become requests only through API defaulting (which copies limits into
// missing requests), so a pod object that never went through the API server
// and sets only limits has no requests for those resources.
//
// Use PodFromInfo when a PodInfo is at hand: it reuses the PodInfo's memoised
// result. Pod returns nil for a nil pod.
func Pod(pod *v1.Pod) *abiv1.Pod {
	if pod == nil {
		return nil
	}
	if reqs, ok := onlyContainerRequests(pod); ok {
		var r framework.Resource
		r.Add(reqs)
		return podMessage(pod, &r)
	}
	// CalculateResource reads only the pod and the PodInfo's memo. A literal
	// PodInfo skips NewPodInfo's parsing of inter-pod affinity selectors,
	// which this conversion never reads, and the error that parsing can
	// return.
	pi := framework.PodInfo{Pod: pod}
	return podMessage(pod, pi.CalculateResource().Resource)
}

// onlyContainerRequests returns the sum of a pod's app containers'
// requests when they are all CalculateResource would count: no init
// containers, overhead, pod-level resources or resource claims, and no
// status that resizing or DRA reads (a pod not yet started).
// CalculateResource then sums exactly those lists, but costs about 15
// times the rest of the conversion (three aggregations into maps, for
// allocated and actuated resources), once per cycle's pod, since the
// scheduler does not hand plugins its PodInfo. Quantities are added before
// they are rounded, as CalculateResource adds them: three containers asking
// 0.0001 CPU each come to 1m, not 3m.
func onlyContainerRequests(pod *v1.Pod) (v1.ResourceList, bool) {
	spec, st := &pod.Spec, &pod.Status
	if len(spec.Containers) == 0 || len(spec.InitContainers) > 0 || spec.Overhead != nil || spec.Resources != nil || len(spec.ResourceClaims) > 0 ||
		len(st.ContainerStatuses) > 0 || len(st.InitContainerStatuses) > 0 || st.Resources != nil || st.AllocatedResources != nil ||
		st.ExtendedResourceClaimStatus != nil || len(st.ResourceClaimStatuses) > 0 {
		return nil, false
	}
	for _, c := range st.Conditions {
		if c.Type == v1.PodResizePending {
			return nil, false
		}
	}
	if len(spec.Containers) == 1 {
		return spec.Containers[0].Resources.Requests, true
	}
	sum := make(v1.ResourceList, len(spec.Containers[0].Resources.Requests))
	for i := range spec.Containers {
		for name, q := range spec.Containers[i].Resources.Requests {
			if have, ok := sum[name]; ok {
				have.Add(q)
				sum[name] = have
			} else {
				sum[name] = q.DeepCopy()
			}
		}
	}
	return sum, true
}

// PodFromInfo is Pod for a scheduler PodInfo. It calls pi.CalculateResource,
// which memoises its result inside pi without locking: on a PodInfo that no
// NodeInfo has seen yet (the pod of the current cycle), call it from one
// goroutine at a time. PodInfos held by a NodeInfo were memoised when they
// were added and are only read.
//
// It returns nil for a nil PodInfo or one without a pod.
func PodFromInfo(pi fwk.PodInfo) *abiv1.Pod {
	if pi == nil {
		return nil
	}
	pod := pi.GetPod()
	if pod == nil {
		return nil
	}
	return podMessage(pod, pi.CalculateResource().Resource)
}

func podMessage(pod *v1.Pod, requests fwk.Resource) *abiv1.Pod {
	spec := &pod.Spec
	m := &abiv1.Pod{
		Name:                      pod.Name,
		Namespace:                 pod.Namespace,
		Uid:                       string(pod.UID),
		Labels:                    keyValues(pod.Labels),
		Annotations:               keyValues(pod.Annotations),
		Priority:                  priority(pod),
		PriorityClassName:         spec.PriorityClassName,
		SchedulerName:             spec.SchedulerName,
		NodeSelector:              keyValues(spec.NodeSelector),
		Tolerations:               tolerations(spec.Tolerations),
		TopologySpreadConstraints: spreadConstraints(spec.TopologySpreadConstraints),
		Requests:                  Resources(requests),
		NodeName:                  spec.NodeName,
		NominatedNodeName:         pod.Status.NominatedNodeName,
		PodGroup:                  PodGroupName(pod),
	}
	if owner := ownerOf(pod); owner != nil {
		m.Owner = &abiv1.OwnerReference{}
		ownerInto(owner, m.Owner)
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil {
		na := a.NodeAffinity
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			m.RequiredNodeAffinity = nodeSelectorTerms(req.NodeSelectorTerms)
		}
		m.PreferredNodeAffinity = preferredTerms(na.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	return m
}

// WaitingPod converts a pod parked at Permit, reserved on nodeName. It returns
// nil for a nil pod.
func WaitingPod(p *v1.Pod, nodeName string) *abiv1.WaitingPod {
	if p == nil {
		return nil
	}
	return &abiv1.WaitingPod{
		Name:        p.Name,
		Namespace:   p.Namespace,
		Uid:         string(p.UID),
		Labels:      keyValues(p.Labels),
		Annotations: keyValues(p.Annotations),
		NodeName:    nodeName,
	}
}

func priority(pod *v1.Pod) int32 {
	if p := pod.Spec.Priority; p != nil {
		return *p
	}
	return 0
}

// ownerOf returns the controller owner reference, else the first one, else
// nil. The result points into the pod.
func ownerOf(pod *v1.Pod) *metav1.OwnerReference {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		return ref
	}
	if len(pod.OwnerReferences) > 0 {
		return &pod.OwnerReferences[0]
	}
	return nil
}

func ownerInto(ref *metav1.OwnerReference, out *abiv1.OwnerReference) {
	out.Kind = ref.Kind
	out.Name = ref.Name
	out.Uid = string(ref.UID)
}

// tolerations converts tolerations. An empty operator is written as Equal,
// which is what Kubernetes means by it, so a policy never sees the empty
// spelling.
func tolerations(in []v1.Toleration) []*abiv1.Toleration {
	if len(in) == 0 {
		return nil
	}
	backing := make([]abiv1.Toleration, len(in))
	out := make([]*abiv1.Toleration, len(in))
	for i := range in {
		t, o := &in[i], &backing[i]
		o.Key = t.Key
		o.Operator = string(t.Operator)
		if o.Operator == "" {
			o.Operator = string(v1.TolerationOpEqual)
		}
		o.Value = t.Value
		o.Effect = string(t.Effect)
		if t.TolerationSeconds != nil {
			s := *t.TolerationSeconds
			o.TolerationSeconds = &s
		}
		out[i] = o
	}
	return out
}

func spreadConstraints(in []v1.TopologySpreadConstraint) []*abiv1.TopologySpreadConstraint {
	if len(in) == 0 {
		return nil
	}
	backing := make([]abiv1.TopologySpreadConstraint, len(in))
	out := make([]*abiv1.TopologySpreadConstraint, len(in))
	for i := range in {
		c, o := &in[i], &backing[i]
		o.MaxSkew = c.MaxSkew
		o.TopologyKey = c.TopologyKey
		o.WhenUnsatisfiable = string(c.WhenUnsatisfiable)
		o.LabelSelector = labelSelector(c.LabelSelector)
		if c.MinDomains != nil {
			d := *c.MinDomains
			o.MinDomains = &d
		}
		o.MatchLabelKeys = slices.Clone(c.MatchLabelKeys)
		if p := c.NodeAffinityPolicy; p != nil {
			o.NodeAffinityPolicy = string(*p)
		}
		if p := c.NodeTaintsPolicy; p != nil {
			o.NodeTaintsPolicy = string(*p)
		}
		out[i] = o
	}
	return out
}

// labelSelector keeps the difference between a nil selector (matches
// nothing in a spread constraint) and an empty one (matches everything): the
// first becomes nil, the second an empty message, which the encoding keeps
// apart.
func labelSelector(s *metav1.LabelSelector) *abiv1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &abiv1.LabelSelector{MatchLabels: keyValues(s.MatchLabels)}
	if n := len(s.MatchExpressions); n > 0 {
		backing := make([]abiv1.Requirement, n)
		out.MatchExpressions = make([]*abiv1.Requirement, n)
		for i := range s.MatchExpressions {
			r, o := &s.MatchExpressions[i], &backing[i]
			o.Key = r.Key
			o.Operator = string(r.Operator)
			o.Values = slices.Clone(r.Values)
			out.MatchExpressions[i] = o
		}
	}
	return out
}

func nodeRequirements(in []v1.NodeSelectorRequirement) []*abiv1.Requirement {
	if len(in) == 0 {
		return nil
	}
	backing := make([]abiv1.Requirement, len(in))
	out := make([]*abiv1.Requirement, len(in))
	for i := range in {
		r, o := &in[i], &backing[i]
		o.Key = r.Key
		o.Operator = string(r.Operator)
		o.Values = slices.Clone(r.Values)
		out[i] = o
	}
	return out
}

func nodeSelectorTermInto(t *v1.NodeSelectorTerm, out *abiv1.NodeSelectorTerm) {
	out.MatchExpressions = nodeRequirements(t.MatchExpressions)
	out.MatchFields = nodeRequirements(t.MatchFields)
}

// nodeSelectorTerms keeps empty terms as empty messages. The scheduler's
// node affinity treats an empty term as matching no node; dropping it could
// leave no terms at all, which a policy would read as no requirement.
func nodeSelectorTerms(in []v1.NodeSelectorTerm) []*abiv1.NodeSelectorTerm {
	if len(in) == 0 {
		return nil
	}
	backing := make([]abiv1.NodeSelectorTerm, len(in))
	out := make([]*abiv1.NodeSelectorTerm, len(in))
	for i := range in {
		nodeSelectorTermInto(&in[i], &backing[i])
		out[i] = &backing[i]
	}
	return out
}

func preferredTerms(in []v1.PreferredSchedulingTerm) []*abiv1.PreferredSchedulingTerm {
	if len(in) == 0 {
		return nil
	}
	backing := make([]abiv1.PreferredSchedulingTerm, len(in))
	terms := make([]abiv1.NodeSelectorTerm, len(in))
	out := make([]*abiv1.PreferredSchedulingTerm, len(in))
	for i := range in {
		p, o := &in[i], &backing[i]
		o.Weight = p.Weight
		nodeSelectorTermInto(&p.Preference, &terms[i])
		o.Preference = &terms[i]
		out[i] = o
	}
	return out
}

// PodRequests returns a pod's effective requests as Pod computes them (the
// scheduler's PodInfo.CalculateResource), with Pods set to 1: what one pod
// charges to a node, or to its tenant. It returns nil for a nil pod.
func PodRequests(pod *v1.Pod) *abiv1.Resources {
	if pod == nil {
		return nil
	}
	pi := framework.PodInfo{Pod: pod}
	r := Resources(pi.CalculateResource().Resource)
	if r == nil {
		r = &abiv1.Resources{}
	}
	r.Pods = 1
	return r
}
