package perf

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
)

// Opportunistic batching (k8s 1.35+) reuses a cycle's filter and score
// results for the next pod of equal signature only when every PreFilter,
// Filter, PreScore and Score plugin of the profile signs pods
// (fwk.SignPlugin); a plugin that does not turns batching off for the whole
// profile. Queueing hints (fwk.EnqueueExtensions) decide which cluster
// events move a pod the plugin rejected back to the active queue; a plugin
// without them is treated as interested in every event.
//
// The native twins sign and hint as WasmPolicy does for the example
// policies (issue 23): the fragment's key is the policy's,
// "wasmsched.io/policy/<name>", its value exactly what of the pod the rules
// read, and the hints follow what the rules depend on.

var (
	_ fwk.SignPlugin        = &Native{}
	_ fwk.EnqueueExtensions = &Native{}
	_ fwk.SignPlugin        = &QuotaNative{}
)

// signKey is the fragment key of a policy's signature.
func signKey(policy string) string { return "wasmsched.io/policy/" + policy }

// gpuAnnotations are the pod annotations the gpu rules read, for pods that
// request GPUs.
var gpuAnnotations = []string{annotationProduct, annotationMinMemory, annotationAllowShared}

// gpuSignature is what the gpu rules read of a pod: its effective GPU
// request and, when that is not zero, the three annotations (present ones
// only: an empty annotation is not a missing one). Pods with equal
// signatures get equal verdicts and scores on every node.
type gpuSignature struct {
	GPUs        int64             `json:"gpus"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func signGPU(pod *v1.Pod) gpuSignature {
	pi := framework.PodInfo{Pod: pod}
	s := gpuSignature{GPUs: max(0, pi.CalculateResource().Resource.GetScalarResources()[resourceGPU])}
	if s.GPUs == 0 {
		return s
	}
	for _, k := range gpuAnnotations {
		if v, ok := pod.Annotations[k]; ok {
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[k] = v
		}
	}
	return s
}

// SignPod implements fwk.SignPlugin: the GPU request and the gpu
// annotations. Every pod can be signed.
func (*Native) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return []fwk.SignFragment{{Key: signKey(policyName), Value: signGPU(pod)}}, nil
}

// gpuLabels are the node labels the gpu rules read.
var gpuLabels = []string{labelProduct, labelMemory, labelSharing}

// EventsToRegister lists the events that can turn a rejection by the gpu
// rules into a fit. The rules read of a node its GPU allocatable, its GPU
// labels and the GPUs its pods request; of the pod, what SignPod signs. So:
// a node with GPUs added, a node's GPU labels or GPU allocatable changed,
// a pod that requested GPUs deleted from a node, and the rejected pod's own
// GPU request or annotations changed. Every other event is skipped: in
// particular adding, binding or deleting pods without GPUs never requeues
// a rejected GPU pod.
//
// WasmPolicy's declarations (abi Requeue) are coarser for deletions: a
// PodMatch cannot say "requests nvidia.com/gpu", so the gpu policy requeues
// on any deletion of an assigned pod. The churn workload, whose churning
// pods request no GPUs, shows the difference in its requeue counts.
func (*Native) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, QueueingHintFn: gpuNodeAdded},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.UpdateNodeLabel | fwk.UpdateNodeAllocatable}, QueueingHintFn: gpuNodeChanged},
		{Event: fwk.ClusterEvent{Resource: assignedPod, ActionType: fwk.Delete}, QueueingHintFn: gpuPodDeleted},
		{Event: fwk.ClusterEvent{Resource: targetPod, ActionType: fwk.Update}, QueueingHintFn: gpuPodUpdated},
	}, nil
}

func nodeGPUs(n *v1.Node) int64 {
	q, ok := n.Status.Allocatable[resourceGPU]
	if !ok {
		return 0
	}
	return q.Value()
}

func hint(queue bool) fwk.QueueingHint {
	if queue {
		return fwk.Queue
	}
	return fwk.QueueSkip
}

// gpuNodeAdded queues the pod when the new node has as many GPUs as it asks.
func gpuNodeAdded(_ klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	_, n, err := schedutil.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	return hint(nodeGPUs(n) >= signGPU(pod).GPUs), nil
}

// gpuNodeChanged queues the pod when a GPU label or the GPU allocatable of
// a node changed.
func gpuNodeChanged(_ klog.Logger, _ *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	o, n, err := schedutil.As[*v1.Node](oldObj, newObj)
	if err != nil || o == nil {
		return fwk.Queue, err
	}
	changed := nodeGPUs(o) != nodeGPUs(n)
	for _, k := range gpuLabels {
		changed = changed || o.Labels[k] != n.Labels[k]
	}
	return hint(changed), nil
}

// gpuPodDeleted queues the pod when the deleted pod held GPUs on a node.
func gpuPodDeleted(_ klog.Logger, _ *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	deleted, _, err := schedutil.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	return hint(deleted.Spec.NodeName != "" && signGPU(deleted).GPUs > 0), nil
}

// gpuPodUpdated queues the rejected pod when what the rules read of it
// changed.
func gpuPodUpdated(_ klog.Logger, _ *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	o, n, err := schedutil.As[*v1.Pod](oldObj, newObj)
	if err != nil || o == nil {
		return fwk.Queue, err
	}
	a, b := signGPU(o), signGPU(n)
	same := a.GPUs == b.GPUs && len(a.Annotations) == len(b.Annotations)
	for k, v := range a.Annotations {
		w, ok := b.Annotations[k]
		same = same && ok && v == w
	}
	return hint(!same), nil
}

// quotaSignature is what the quota rules read of a pod: its namespace (the
// tenant) and its effective requests (canonical units, by resource name).
type quotaSignature struct {
	Namespace string           `json:"namespace"`
	Requests  map[string]int64 `json:"requests"`
}

func signQuota(pod *v1.Pod) quotaSignature {
	r := podQuotaRequests(pod)
	s := quotaSignature{Namespace: pod.Namespace, Requests: map[string]int64{}}
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage} {
		if v := amount(r, string(name)); v != 0 {
			s.Requests[string(name)] = v
		}
	}
	for _, sc := range r.GetScalars() {
		if sc.Value != 0 {
			s.Requests[sc.Name] = sc.Value
		}
	}
	return s
}

// SignPod implements fwk.SignPlugin: the namespace and the requests, all
// that PreFilter, Filter and Score read of the pod (the tenants' use is
// cluster state, read anew in every cycle's PreFilter). The quota example
// also reads the priority, in SelectVictims, which this twin lacks.
func (*QuotaNative) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return []fwk.SignFragment{{Key: signKey("quota"), Value: signQuota(pod)}}, nil
}

// quotaPodFreed queues the pod when a pod of a tenant with a quota was
// deleted from a node or scaled down: its tenant's use, or what the other
// tenants can lend, went down.
func (pl *QuotaNative) quotaPodFreed(_ klog.Logger, _ *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	o, _, err := schedutil.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	_, ok := pl.configured[o.Namespace]
	return hint(ok), nil
}

// quotaPodUpdated queues the rejected pod when its requests changed.
func quotaPodUpdated(_ klog.Logger, _ *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	o, n, err := schedutil.As[*v1.Pod](oldObj, newObj)
	if err != nil || o == nil {
		return fwk.Queue, err
	}
	a, b := signQuota(o), signQuota(n)
	same := len(a.Requests) == len(b.Requests)
	for k, v := range a.Requests {
		same = same && b.Requests[k] == v
	}
	return hint(!same), nil
}
