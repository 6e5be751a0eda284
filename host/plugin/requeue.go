package plugin

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/clusterctx"
	"github.com/wasmsched/wasmsched/host/compose"
	"github.com/wasmsched/wasmsched/host/convert"
)

// rejection is what turned a pod away in its last scheduling attempt: the
// names of the policies that rejected it (at PreFilter, Filter on any node,
// Reserve or Permit, or while it waited at Permit) and of the required
// policies that could not serve. The queueing hints and the requeues after
// a swap read it; "" stands for the composition itself, which any event may
// resolve.
type rejection struct {
	pod    *v1.Pod
	stored atomic.Bool
	mu     sync.Mutex // serialises add
	// names is replaced, never changed in place: the queue's hints read it
	// for every pending pod on every event.
	names atomic.Pointer[[]string]
}

// list returns the names of the policies that rejected the attempt. The
// caller must not modify it.
func (r *rejection) list() []string {
	if l := r.names.Load(); l != nil {
		return *l
	}
	return nil
}

func (r *rejection) has(name string) bool { return slices.Contains(r.list(), name) }

// rejections holds the rejection of each pod this profile turned away, by
// UID, until the pod is bound, deleted, or tried again. Safe for concurrent
// use. The queue's hints look a pod up for every pending pod on every
// cluster event, so this is a plain map under a read lock (a sync.Map's
// lookup cost several times more on that path).
type rejections struct {
	mu sync.RWMutex
	m  map[types.UID]*rejection
}

// start begins a pod's attempt: the previous attempt's record no longer
// holds. The record is stored on the first rejection only, so pods that
// fit at once cost a map deletion.
func (rs *rejections) start(pod *v1.Pod) *rejection {
	rs.forget(pod.UID)
	return &rejection{pod: pod}
}

// add records that policy name rejected the attempt of r.
func (rs *rejections) add(r *rejection, name string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if cur := r.list(); !slices.Contains(cur, name) {
		l := append(slices.Clip(cur), name)
		r.names.Store(&l)
	}
	r.mu.Unlock()
	if !r.stored.Swap(true) {
		rs.mu.Lock()
		if rs.m == nil {
			rs.m = map[types.UID]*rejection{}
		}
		rs.m[r.pod.UID] = r
		rs.mu.Unlock()
	}
}

// addPod records a rejection of pod outside its own cycle (a waiting pod
// rejected by another pod's Permit).
func (rs *rejections) addPod(pod *v1.Pod, name string) {
	rs.mu.Lock()
	r := rs.m[pod.UID]
	if r == nil {
		if rs.m == nil {
			rs.m = map[types.UID]*rejection{}
		}
		r = &rejection{pod: pod}
		rs.m[pod.UID] = r
	}
	r.stored.Store(true)
	rs.mu.Unlock()
	rs.add(r, name)
}

func (rs *rejections) get(uid types.UID) *rejection {
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	return rs.m[uid]
}

func (rs *rejections) forget(uid types.UID) {
	rs.mu.Lock()
	delete(rs.m, uid)
	rs.mu.Unlock()
}

// pods returns the pods whose rejection satisfies match, by
// namespace/name, as Activate wants them.
func (rs *rejections) pods(match func(*rejection) bool) map[string]*v1.Pod {
	rs.mu.RLock()
	all := make([]*rejection, 0, len(rs.m))
	for _, r := range rs.m {
		all = append(all, r)
	}
	rs.mu.RUnlock()
	out := map[string]*v1.Pod{}
	for _, r := range all {
		if match(r) {
			out[r.pod.Namespace+"/"+r.pod.Name] = r.pod
		}
	}
	return out
}

// trackPods forgets the rejections of pods that are bound or deleted,
// whoever bound them.
func (pl *Plugin) trackPods() {
	if pl.handle == nil || pl.handle.SharedInformerFactory() == nil {
		return
	}
	_, _ = pl.handle.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if p, ok := obj.(*v1.Pod); ok && p.Spec.NodeName != "" {
				pl.rejected.forget(p.UID)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*v1.Pod); ok {
				pl.rejected.forget(p.UID)
			}
		},
	})
}

// requeueRejectedBy activates the pods that one of the named policies
// rejected, after those policies changed (a new version, a new roster, a
// required policy that can serve again): their verdicts may not hold any
// more, and no cluster event would retry them before the periodic flush.
// Pods nothing of the change concerns stay where they are.
func (pl *Plugin) requeueRejectedBy(names ...string) {
	pl.activate("swap", func(r *rejection) bool {
		for _, n := range names {
			if r.has(n) || r.has("") {
				return true
			}
		}
		return false
	})
}

// requeueForObjects activates the pods rejected by a policy that reads
// objects of kind and declared no requeue events or declared objects; for
// tenantUsage, by a policy that reads tenant usage and declared no requeue
// events or pod deletions.
func (pl *Plugin) requeueForObjects(kind clusterctx.Kind) {
	r := pl.currentRoster()
	cause := "objects"
	if kind == tenantUsage {
		cause = "usage"
	}
	pl.activate(cause, func(rej *rejection) bool {
		for _, name := range rej.list() {
			v := r.version(name)
			if v == nil {
				return true
			}
			req := v.Info().GetRequeue()
			if kind == tenantUsage {
				info := v.Info()
				if (info.GetWantsNamespaceUsage() || len(info.GetUsageLabelKeys()) > 0) && (req == nil || req.GetPodDeleted() != nil) {
					return true
				}
				continue
			}
			if req != nil && !req.GetObjects() {
				continue
			}
			if slices.Contains(v.ContextKinds(), kind) {
				return true
			}
		}
		return false
	})
}

func (pl *Plugin) activate(cause string, match func(*rejection) bool) {
	if pl.handle == nil || pl.closed.Load() {
		return
	}
	if pods := pl.rejected.pods(match); len(pods) > 0 {
		requeuedPods.WithLabelValues(profileName(pl.handle), cause).Add(float64(len(pods)))
		pl.handle.Activate(klog.Background(), pods)
	}
}

// EventsToRegister registers the cluster events that can change a policy's
// verdict, each with a queueing hint that asks the policies that rejected
// the pod whether they declared the event (PolicyInfo.requeue). A pod
// rejected by a policy that declared nothing is retried on every one of
// them, as a policy's rules may read anything of nodes and pods.
func (pl *Plugin) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return append([]fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, QueueingHintFn: pl.hintNodeAdded},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Update}, QueueingHintFn: pl.hintNodeUpdated},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add}, QueueingHintFn: pl.hintPodAdded},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: pl.hintPodDeleted},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Update}, QueueingHintFn: pl.hintPodUpdated},
	}, pl.groupEvents()...), nil
}

// hint answers for pod, rejected earlier: Queue when a policy that
// rejected it declared nothing, is gone, or declared an event matches.
func (pl *Plugin) hint(pod *v1.Pod, matches func(*abiv1.Requeue) bool) fwk.QueueingHint {
	return pl.hintFor(pod, func(req *abiv1.Requeue, _ *abiv1.PolicyInfo) bool { return matches(req) })
}

// readsUsage reports whether a policy reads tenant usage.
func readsUsage(info *abiv1.PolicyInfo) bool {
	return info.GetWantsNamespaceUsage() || len(info.GetUsageLabelKeys()) > 0
}

// hintFor is hint with the policy's info at hand.
func (pl *Plugin) hintFor(pod *v1.Pod, matches func(*abiv1.Requeue, *abiv1.PolicyInfo) bool) fwk.QueueingHint {
	rej := pl.rejected.get(pod.UID)
	if rej == nil {
		// Not turned away by a policy this process saw (a restart, another
		// profile's record): retry, as without hints.
		return fwk.Queue
	}
	r := pl.currentRoster()
	for _, name := range rej.list() {
		v := r.version(name)
		if v == nil {
			return fwk.Queue
		}
		req := v.Info().GetRequeue()
		if req == nil || matches(req, v.Info()) {
			return fwk.Queue
		}
	}
	return fwk.QueueSkip
}

// nodeFields reports whether req declared any node event.
func nodeFields(req *abiv1.Requeue) bool {
	return req.GetNodeAdded() || req.GetNodeUpdated() || len(req.GetNodeLabelKeys()) > 0 || req.GetNodeAllocatable() || req.GetNodeTaints()
}

func (pl *Plugin) hintNodeAdded(_ klog.Logger, pod *v1.Pod, _, _ any) (fwk.QueueingHint, error) {
	return pl.hint(pod, nodeFields), nil
}

func (pl *Plugin) hintNodeUpdated(_ klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldNode, ok1 := oldObj.(*v1.Node)
	newNode, ok2 := newObj.(*v1.Node)
	if !ok1 || !ok2 {
		return fwk.Queue, nil
	}
	return pl.hint(pod, func(req *abiv1.Requeue) bool {
		switch {
		case req.GetNodeUpdated():
			return true
		case req.GetNodeAllocatable() && !equality.Semantic.DeepEqual(oldNode.Status.Allocatable, newNode.Status.Allocatable):
			return true
		case req.GetNodeTaints() && (oldNode.Spec.Unschedulable != newNode.Spec.Unschedulable || !equality.Semantic.DeepEqual(oldNode.Spec.Taints, newNode.Spec.Taints)):
			return true
		}
		return labelsChanged(req.GetNodeLabelKeys(), oldNode.Labels, newNode.Labels)
	}), nil
}

// labelsChanged reports whether a label with one of keys ("*": any) was
// added, changed or removed.
func labelsChanged(keys []string, old, cur map[string]string) bool {
	for _, k := range keys {
		if k == "*" {
			return !equality.Semantic.DeepEqual(old, cur)
		}
		ov, ok1 := old[k]
		nv, ok2 := cur[k]
		if ok1 != ok2 || ov != nv {
			return true
		}
	}
	return false
}

// podMatches reports whether other is related to the rejected pod as m
// asks: any pod when m sets nothing, else the same namespace, the same
// value of one of the label keys, or a request of one of the resources.
func podMatches(m *abiv1.PodMatch, rejected, other *v1.Pod, reqs *requestsMemo) bool {
	if m == nil || other == nil {
		return false
	}
	if !m.GetSameNamespace() && len(m.GetSameLabelKeys()) == 0 && len(m.GetResources()) == 0 {
		return true
	}
	if m.GetSameNamespace() && other.Namespace == rejected.Namespace {
		return true
	}
	for _, k := range m.GetSameLabelKeys() {
		if v, ok := rejected.Labels[k]; ok {
			if ov, ok := other.Labels[k]; ok && ov == v {
				return true
			}
		}
	}
	if len(m.GetResources()) > 0 {
		r := reqs.of(other)
		for _, name := range m.GetResources() {
			if requests(r, name) {
				return true
			}
		}
	}
	return false
}

// requests reports whether r has a request of the resource name.
func requests(r *abiv1.Resources, name string) bool {
	switch v1.ResourceName(name) {
	case v1.ResourceCPU:
		return r.GetMilliCpu() > 0
	case v1.ResourceMemory:
		return r.GetMemory() > 0
	case v1.ResourceEphemeralStorage:
		return r.GetEphemeralStorage() > 0
	}
	for _, s := range r.GetScalars() {
		if s.GetName() == name && s.GetValue() > 0 {
			return true
		}
	}
	return false
}

func (pl *Plugin) hintPodAdded(_ klog.Logger, pod *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	added, _ := newObj.(*v1.Pod)
	return pl.hint(pod, func(req *abiv1.Requeue) bool { return podMatches(req.GetPodAdded(), pod, added, &pl.eventRequests) }), nil
}

func (pl *Plugin) hintPodDeleted(_ klog.Logger, pod *v1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	if t, ok := oldObj.(cache.DeletedFinalStateUnknown); ok {
		oldObj = t.Obj
	}
	deleted, _ := oldObj.(*v1.Pod)
	if deleted != nil && deleted.Spec.NodeName == "" {
		// A pod that never ran freed nothing; it could only have counted
		// as a member of something (pod_added covers its arrival).
		return pl.hint(pod, func(req *abiv1.Requeue) bool { return podMatches(req.GetPodAdded(), pod, deleted, &pl.eventRequests) }), nil
	}
	// A policy that reads tenant usage is retried once the usage counted
	// the pod out (watchUsage), not on the event: the usage may not have
	// seen it yet, and a retry refused on the old count leaves the pod
	// nominated on the old count (preemption may then evict again).
	return pl.hintFor(pod, func(req *abiv1.Requeue, info *abiv1.PolicyInfo) bool {
		return !readsUsage(info) && podMatches(req.GetPodDeleted(), pod, deleted, &pl.eventRequests)
	}), nil
}

// hintPodUpdated: the rejected pod's own update retries it when it changed
// what a policy is sent of it; another pod bound or relabelled is an
// arrival (pod_added), a bound pod whose requests shrank a departure
// (pod_deleted).
func (pl *Plugin) hintPodUpdated(_ klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldPod, ok1 := oldObj.(*v1.Pod)
	newPod, ok2 := newObj.(*v1.Pod)
	if !ok1 || !ok2 {
		return fwk.Queue, nil
	}
	if newPod.UID == pod.UID {
		// The scheduler's own write after each failed attempt (the
		// PodScheduled condition) is such an update, and changes nothing a
		// policy can read: retrying on it filtered every pending pod twice.
		if samePodMessage(oldPod, newPod) {
			return fwk.QueueSkip, nil
		}
		return fwk.Queue, nil
	}
	bound := oldPod.Spec.NodeName == "" && newPod.Spec.NodeName != ""
	relabelled := !maps.Equal(oldPod.Labels, newPod.Labels)
	return pl.hintFor(pod, func(req *abiv1.Requeue, info *abiv1.PolicyInfo) bool {
		if (bound || relabelled) && podMatches(req.GetPodAdded(), pod, newPod, &pl.eventRequests) {
			return true
		}
		return req.GetPodDeleted() != nil && !readsUsage(info) && newPod.Spec.NodeName != "" &&
			pl.eventRequests.shrank(oldPod, newPod) && podMatches(req.GetPodDeleted(), pod, newPod, &pl.eventRequests)
	}), nil
}

// samePodMessage reports whether two versions of a pod convert to the same
// ABI Pod (the conversion orders labels, annotations and resources).
func samePodMessage(a, b *v1.Pod) bool {
	am, err1 := convert.Pod(a).MarshalVT()
	bm, err2 := convert.Pod(b).MarshalVT()
	return err1 == nil && err2 == nil && bytes.Equal(am, bm)
}

// requestsMemo keeps the requests of the last pods an event carried. The
// queue asks a plugin's hint once per pending pod it rejected, with the
// same objects each time: thousands of calls per event when many pods are
// pending, each of which computed the requests again. The informer's
// objects are never modified, so a pointer stands for its content; the
// memo holds the pods it keys on, so their addresses are not reused.
type requestsMemo struct {
	mu   sync.Mutex
	pods [2]*v1.Pod // an update carries two
	reqs [2]*abiv1.Resources
	next int
}

// of returns the pod's requests (convert.PodRequests); a nil memo computes
// them.
func (m *requestsMemo) of(pod *v1.Pod) *abiv1.Resources {
	if m == nil {
		return convert.PodRequests(pod)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, p := range m.pods {
		if p == pod {
			return m.reqs[i]
		}
	}
	r := convert.PodRequests(pod)
	m.pods[m.next], m.reqs[m.next] = pod, r
	m.next = 1 - m.next
	return r
}

// shrank reports whether any request of the pod went down.
func (m *requestsMemo) shrank(oldPod, newPod *v1.Pod) bool {
	o, n := m.of(oldPod), m.of(newPod)
	if n.GetMilliCpu() < o.GetMilliCpu() || n.GetMemory() < o.GetMemory() || n.GetEphemeralStorage() < o.GetEphemeralStorage() {
		return true
	}
	for _, s := range o.GetScalars() {
		shrank := true
		for _, ns := range n.GetScalars() {
			if ns.GetName() == s.GetName() && ns.GetValue() >= s.GetValue() {
				shrank = false
			}
		}
		if shrank {
			return true
		}
	}
	return false
}

// noteRejection records s in the attempt's rejection when it rejects the
// pod.
func (pl *Plugin) noteRejection(st *cycleState, s *compose.Status) {
	if s != nil && (s.Code == abiv1.Code_CODE_UNSCHEDULABLE || s.Code == abiv1.Code_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE) {
		pl.rejected.add(st.rejected, s.Policy)
	}
}
