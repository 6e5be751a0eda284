// Package convert turns the scheduler's objects (pods, nodes, NodeInfos) into
// the ABI messages of package abiv1 that the host sends to a policy.
//
// It runs on the scheduler's hot path, once per pod per cycle and once per
// changed node, so it works without reflection and allocates repeated
// messages in one backing array per field rather than one at a time.
//
// What it owns: the mapping from Kubernetes fields to ABI fields, including the
// canonical units (milli-CPU, bytes, counts) and a deterministic order for
// every repeated field it builds (scalars by name, pod summaries by
// namespace/name).
//
// What it must never do: mutate or retain its inputs. The returned messages
// share no mutable memory with the objects they were built from (maps and
// slices are copied; only immutable strings are shared), so a caller may keep
// or change them freely while the informer cache moves on. The one side effect
// is the one the scheduler itself has: PodInfo.CalculateResource memoises its
// result inside the PodInfo (see PodFromInfo).
//
// All functions are safe to call from any number of goroutines on distinct
// inputs, and on shared inputs that the scheduler treats as read-only.
//
// Labels, annotations, node selectors and match labels travel as KeyValue
// lists sorted by key, so every message marshals to the same bytes for the
// same input.
package convert

import (
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// Resources converts a scheduler Resource (a pod's effective requests, or a
// NodeInfo's requested or allocatable sum) to its ABI form. pods carries
// GetAllowedPodNumber, which is zero for requests.
//
// Scalars are sorted by name. Scalars whose value is zero are left out: the
// scheduler keeps a zero entry behind when the last pod using an extended
// resource leaves a node, and an absent scalar already reads as zero, so
// dropping it makes equal states encode equally.
//
// It returns nil for a nil Resource.
func Resources(r fwk.Resource) *abiv1.Resources {
	if isNilResource(r) {
		return nil
	}
	out := &abiv1.Resources{}
	resourcesInto(r, out)
	return out
}

// isNilResource reports whether r is nil, including the typed nil a
// zero-value framework.NodeInfo hands out (whose methods would panic).
func isNilResource(r fwk.Resource) bool {
	if r == nil {
		return true
	}
	fr, ok := r.(*framework.Resource)
	return ok && fr == nil
}

// resourcesInto fills out from a non-nil r.
func resourcesInto(r fwk.Resource, out *abiv1.Resources) {
	out.MilliCpu = r.GetMilliCPU()
	out.Memory = r.GetMemory()
	out.EphemeralStorage = r.GetEphemeralStorage()
	out.Pods = int64(r.GetAllowedPodNumber())
	out.Scalars = scalarsFromMap(r.GetScalarResources())
}

func scalarsFromMap(m map[v1.ResourceName]int64) []*abiv1.Scalar {
	n := 0
	for _, v := range m {
		if v != 0 {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	backing := make([]abiv1.Scalar, n)
	out := make([]*abiv1.Scalar, 0, n)
	for name, v := range m {
		if v == 0 {
			continue
		}
		s := &backing[len(out)]
		s.Name = string(name)
		s.Value = v
		out = append(out, s)
	}
	sortScalars(out)
	return out
}

// standardResources are the names ResourceList maps to dedicated fields.
var standardResources = [...]v1.ResourceName{
	v1.ResourceCPU,
	v1.ResourceMemory,
	v1.ResourceEphemeralStorage,
	v1.ResourcePods,
}

// ResourceList converts a node's allocatable or capacity list to its ABI
// form: cpu in milli-CPU (Quantity.MilliValue), memory and ephemeral-storage
// in bytes and pods as a count (Quantity.Value, which rounds a fractional
// value up), and every other name (extended resources such as
// nvidia.com/gpu, hugepages-2Mi, ...) as a scalar by Value, sorted by name.
//
// Unlike Resources it keeps zero-valued scalars, because the list is what the
// node reports. It also keeps names the scheduler's own Resource ignores
// (those that are neither native, extended, hugepages nor attachable-volumes);
// nodes do not report such names in practice.
//
// It returns nil for a nil list.
func ResourceList(rl v1.ResourceList) *abiv1.Resources {
	if rl == nil {
		return nil
	}
	n := len(rl)
	for _, name := range standardResources {
		if _, ok := rl[name]; ok {
			n--
		}
	}
	out := &abiv1.Resources{}
	var backing []abiv1.Scalar
	if n > 0 {
		backing = make([]abiv1.Scalar, n)
		out.Scalars = make([]*abiv1.Scalar, 0, n)
	}
	for name, q := range rl {
		switch name {
		case v1.ResourceCPU:
			out.MilliCpu = q.MilliValue()
		case v1.ResourceMemory:
			out.Memory = q.Value()
		case v1.ResourceEphemeralStorage:
			out.EphemeralStorage = q.Value()
		case v1.ResourcePods:
			out.Pods = q.Value()
		default:
			s := &backing[len(out.Scalars)]
			s.Name = string(name)
			s.Value = q.Value()
			out.Scalars = append(out.Scalars, s)
		}
	}
	sortScalars(out.Scalars)
	return out
}

func sortScalars(s []*abiv1.Scalar) {
	if len(s) > 1 {
		slices.SortFunc(s, func(a, b *abiv1.Scalar) int { return strings.Compare(a.Name, b.Name) })
	}
}

// keyValues turns a map into a KeyValue list sorted by key, allocated in one
// backing array. A nil or empty map gives nil.
func keyValues(m map[string]string) []*abiv1.KeyValue {
	if len(m) == 0 {
		return nil
	}
	backing := make([]abiv1.KeyValue, len(m))
	out := make([]*abiv1.KeyValue, 0, len(m))
	i := 0
	for k, v := range m {
		backing[i].Key, backing[i].Value = k, v
		out = append(out, &backing[i])
		i++
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Key < out[b].Key })
	return out
}

// KeyValues turns a map (labels, annotations) into a KeyValue list sorted by
// key, as every message built here carries them. A nil or empty map gives
// nil.
func KeyValues(m map[string]string) []*abiv1.KeyValue { return keyValues(m) }
