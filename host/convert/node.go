package convert

import (
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// Node converts a node object: name, labels, annotations, taints,
// allocatable and capacity (see ResourceList), spec.unschedulable and the
// conditions (type, status, reason). It returns nil for a nil node.
func Node(node *v1.Node) *abiv1.Node {
	if node == nil {
		return nil
	}
	return &abiv1.Node{
		Name:          node.Name,
		Labels:        keyValues(node.Labels),
		Annotations:   keyValues(node.Annotations),
		Taints:        taints(node.Spec.Taints),
		Allocatable:   ResourceList(node.Status.Allocatable),
		Capacity:      ResourceList(node.Status.Capacity),
		Unschedulable: node.Spec.Unschedulable,
		Conditions:    conditions(node.Status.Conditions),
	}
}

// NodeInfo converts a scheduler NodeInfo, naming it by handle. requested is
// ni.GetRequested(), which counts assumed pods as well as bound ones, and
// pod_count is the number of those pods. With withPods it also carries one
// summary per pod, sorted by namespace, name and uid; without it, pods is
// left empty and the pods are not visited.
//
// node is nil when the NodeInfo has no node object (the node was deleted
// while pods were still accounted to it). NodeInfo returns nil for a nil ni.
//
// ni must not change during the call: pass a snapshot NodeInfo, or hold the
// lock that guards it.
func NodeInfo(handle int32, ni fwk.NodeInfo, withPods bool) *abiv1.NodeInfo {
	if ni == nil {
		return nil
	}
	m := &abiv1.NodeInfo{
		Handle:     handle,
		Generation: ni.GetGeneration(),
		Node:       Node(ni.Node()),
		Requested:  requested(ni),
		PodCount:   int32(len(ni.GetPods())),
	}
	if withPods {
		m.Pods = podSummaries(ni.GetPods())
	}
	return m
}

// NodeUsage converts what changes in a NodeInfo when pods come and go:
// its generation, requested and pod_count, as NodeInfo sets them. It
// returns nil for a nil ni.
func NodeUsage(handle int32, ni fwk.NodeInfo) *abiv1.NodeUsage {
	if ni == nil {
		return nil
	}
	return &abiv1.NodeUsage{
		Handle:     handle,
		Generation: ni.GetGeneration(),
		Requested:  requested(ni),
		PodCount:   int32(len(ni.GetPods())),
	}
}

// requested is ni.GetRequested() with the pods counted: the scheduler does
// not count them in Requested; the ABI does, so that Free("pods") is the
// room left on the node.
func requested(ni fwk.NodeInfo) *abiv1.Resources {
	r := Resources(ni.GetRequested())
	if r == nil {
		r = &abiv1.Resources{}
	}
	r.Pods = int64(len(ni.GetPods()))
	return r
}

// podSummaries converts the pods on a node. Their requests come from
// CalculateResource, which NodeInfo memoised when each pod was added, so this
// only reads.
func podSummaries(pods []fwk.PodInfo) []*abiv1.PodSummary {
	if len(pods) == 0 {
		return nil
	}
	backing := make([]abiv1.PodSummary, len(pods))
	requests := make([]abiv1.Resources, len(pods))
	owners := make([]abiv1.OwnerReference, len(pods))
	out := make([]*abiv1.PodSummary, 0, len(pods))
	for _, pi := range pods {
		if pi == nil {
			continue
		}
		pod := pi.GetPod()
		if pod == nil {
			continue
		}
		i := len(out)
		s := &backing[i]
		s.Name = pod.Name
		s.Namespace = pod.Namespace
		s.Uid = string(pod.UID)
		s.Labels = keyValues(pod.Labels)
		s.Priority = priority(pod)
		if r := pi.CalculateResource().Resource; !isNilResource(r) {
			resourcesInto(r, &requests[i])
			s.Requests = &requests[i]
		}
		if ref := ownerOf(pod); ref != nil {
			ownerInto(ref, &owners[i])
			s.Owner = &owners[i]
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *abiv1.PodSummary) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Uid, b.Uid)
	})
	return out
}

func taints(in []v1.Taint) []*abiv1.Taint {
	if len(in) == 0 {
		return nil
	}
	backing := make([]abiv1.Taint, len(in))
	out := make([]*abiv1.Taint, len(in))
	for i := range in {
		t, o := &in[i], &backing[i]
		o.Key = t.Key
		o.Value = t.Value
		o.Effect = string(t.Effect)
		out[i] = o
	}
	return out
}

func conditions(in []v1.NodeCondition) []*abiv1.NodeCondition {
	if len(in) == 0 {
		return nil
	}
	backing := make([]abiv1.NodeCondition, len(in))
	out := make([]*abiv1.NodeCondition, len(in))
	for i := range in {
		c, o := &in[i], &backing[i]
		o.Type = string(c.Type)
		o.Status = string(c.Status)
		o.Reason = c.Reason
		out[i] = o
	}
	return out
}
