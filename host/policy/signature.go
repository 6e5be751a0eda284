package policy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/convert"
	"github.com/wasmsched/wasmsched/host/engine"
)

// podView is what a policy declared of the pod (PolicyInfo.signature): the
// host sends it nothing else, so pods equal in the view are judged alike
// and may share a signature. It is built once per version and only read.
type podView struct {
	fields                       map[string]bool
	labels, annotations, results []string
}

// signatureFields are the Pod fields a signature may declare whole. name,
// uid and scheduler_name are always sent.
var signatureFields = []string{
	"namespace", "owner", "priority", "priority_class_name", "node_selector",
	"required_node_affinity", "preferred_node_affinity", "tolerations",
	"topology_spread_constraints", "requests", "labels", "annotations",
	"node_name", "nominated_node_name", "pod_group",
}

// compileView checks a declared signature and returns its view, or nil
// when the policy declared none.
func compileView(sig *abiv1.PodSignature) (*podView, error) {
	if sig == nil {
		return nil, nil
	}
	v := &podView{fields: map[string]bool{}}
	for _, f := range sig.GetFields() {
		if !slices.Contains(signatureFields, f) {
			return nil, fmt.Errorf("its pod signature declares the field %q, which the ABI's Pod does not have (one of %s)", f, strings.Join(signatureFields, ", "))
		}
		v.fields[f] = true
	}
	for _, list := range [][]string{sig.GetLabelKeys(), sig.GetAnnotationKeys(), sig.GetResources()} {
		for _, k := range list {
			if k == "" {
				return nil, fmt.Errorf("its pod signature declares an empty label, annotation or resource name")
			}
		}
	}
	v.labels = sorted(sig.GetLabelKeys())
	v.annotations = sorted(sig.GetAnnotationKeys())
	v.results = sorted(sig.GetResources())
	return v, nil
}

func sorted(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

// strip returns the part of m the view declares, plus the pod's identity
// (name, uid) and scheduler name when identity is set. m is not changed;
// the result shares m's sub-messages.
func (v *podView) strip(m *abiv1.Pod, identity bool) *abiv1.Pod {
	out := &abiv1.Pod{SchedulerName: m.GetSchedulerName()}
	if identity {
		out.Name, out.Uid = m.GetName(), m.GetUid()
	}
	f := v.fields
	if f["namespace"] {
		out.Namespace = m.GetNamespace()
	}
	if f["owner"] {
		out.Owner = m.GetOwner()
	}
	if f["priority"] {
		out.Priority = m.GetPriority()
	}
	if f["priority_class_name"] {
		out.PriorityClassName = m.GetPriorityClassName()
	}
	if f["node_selector"] {
		out.NodeSelector = m.GetNodeSelector()
	}
	if f["required_node_affinity"] {
		out.RequiredNodeAffinity = m.GetRequiredNodeAffinity()
	}
	if f["preferred_node_affinity"] {
		out.PreferredNodeAffinity = m.GetPreferredNodeAffinity()
	}
	if f["tolerations"] {
		out.Tolerations = m.GetTolerations()
	}
	if f["topology_spread_constraints"] {
		out.TopologySpreadConstraints = m.GetTopologySpreadConstraints()
	}
	if f["node_name"] {
		out.NodeName = m.GetNodeName()
	}
	if f["nominated_node_name"] {
		out.NominatedNodeName = m.GetNominatedNodeName()
	}
	if f["pod_group"] {
		out.PodGroup = m.GetPodGroup()
	}
	out.Labels = pick(m.GetLabels(), f["labels"], v.labels)
	out.Annotations = pick(m.GetAnnotations(), f["annotations"], v.annotations)
	switch {
	case f["requests"]:
		out.Requests = m.GetRequests()
	case len(v.results) > 0:
		out.Requests = pickResources(m.GetRequests(), v.results)
	}
	return out
}

// signature is the declared part of m, without its identity, encoded:
// equal for pods the version judges alike.
func (v *podView) signature(m *abiv1.Pod) []byte {
	return engine.Marshal(v.strip(m, false))
}

// pick returns all of kvs, or those whose key is in keys (sorted), in
// kvs's order (sorted by key).
func pick(kvs []*abiv1.KeyValue, all bool, keys []string) []*abiv1.KeyValue {
	if all {
		return kvs
	}
	var out []*abiv1.KeyValue
	for _, kv := range kvs {
		if _, ok := slices.BinarySearch(keys, kv.GetKey()); ok {
			out = append(out, kv)
		}
	}
	return out
}

func pickResources(r *abiv1.Resources, names []string) *abiv1.Resources {
	if r == nil {
		return nil
	}
	out := &abiv1.Resources{}
	for _, n := range names {
		switch v1.ResourceName(n) {
		case v1.ResourceCPU:
			out.MilliCpu = r.GetMilliCpu()
		case v1.ResourceMemory:
			out.Memory = r.GetMemory()
		case v1.ResourceEphemeralStorage:
			out.EphemeralStorage = r.GetEphemeralStorage()
		case v1.ResourcePods:
			out.Pods = r.GetPods()
		default:
			for _, s := range r.GetScalars() {
				if s.GetName() == n {
					out.Scalars = append(out.Scalars, s)
				}
			}
		}
	}
	return out
}

// Signing says how a version signs pods for batching.
type Signing int

const (
	// Unsigned: the version declared nothing; its pods are never batched.
	Unsigned Signing = iota
	// Declared: the version declared a PodSignature, and sees only that.
	Declared
	// Signs: the version exports POINT_SIGN and sees whole pods.
	Signs
	// Neutral: the version has no PreFilter, Filter, PreScore or Score, so
	// its verdicts cannot tell pods apart and it signs every pod alike
	// (a policy that only places pod groups, or only permits).
	Neutral
)

// judgingPoints are the points batching reuses the results of.
var judgingPoints = pointSet(abiv1.Point_POINT_PRE_FILTER, abiv1.Point_POINT_FILTER, abiv1.Point_POINT_PRE_SCORE, abiv1.Point_POINT_SCORE)

// Signing returns how the version signs pods.
func (p *Policy) Signing() Signing {
	switch {
	case p.Implements(abiv1.Point_POINT_SIGN):
		return Signs
	case p.view != nil:
		return Declared
	case p.info.Points&judgingPoints == 0:
		return Neutral
	}
	return Unsigned
}

// Sign returns the version's signature of pod: the bytes that are equal
// for pods the version judges alike in PreFilter, Filter, PreScore and
// Score. ok is false, with a reason, when the pod must not be batched (the
// version declared no signature, or its Sign refused the pod). For a
// Declared version the signature is the declared part of the pod as the
// guest receives it, without its identity; a Signs version is asked, which
// takes an instance for one call. Safe for concurrent use.
func (p *Policy) Sign(ctx context.Context, pod *v1.Pod) (sig []byte, ok bool, reason string, err error) {
	switch p.Signing() {
	case Declared:
		return p.view.signature(convert.Pod(pod)), true, "", nil
	case Neutral:
		return []byte{}, true, "", nil
	case Unsigned:
		return nil, false, "it declares no pod signature", nil
	}
	const call = "sign"
	err = p.with(ctx, call, func(m *member) error {
		code, err := m.in.Call(abiv1.Point_POINT_SIGN, engine.Marshal(&abiv1.SignRequest{Pod: convert.Pod(pod)}))
		if err != nil {
			return err
		}
		r, err := m.in.Result(call)
		if err != nil {
			return err
		}
		switch code {
		case abiv1.Code_CODE_SUCCESS:
			sig, ok = slices.Clone(r.GetSignature()), true
			if sig == nil {
				sig = []byte{}
			}
		case abiv1.Code_CODE_UNSCHEDULABLE:
			reason = strings.Join(r.GetReasons(), "; ")
			if reason == "" {
				reason = "its Sign refused the pod"
			}
		default:
			return p.CallError(call, engine.KindInvalid, fmt.Errorf("sign answered code %d; want CODE_SUCCESS (1) or CODE_UNSCHEDULABLE (3)", code))
		}
		return nil
	})
	return sig, ok, reason, err
}
