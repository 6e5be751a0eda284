package plugin

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// Reserve counts the pod in the tenant usage as if bound (so that the
// next pods of a burst see it before its binding is written), keeps a copy
// of the chosen node for the binding phase and tells policies that export
// Reserve which node the pod got.
func (pl *Plugin) Reserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	pl.cluster.assume(pod)
	st, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	// Only the binding phase needs the copy; most policies have no calls
	// there, and copying a node with its pods costs every pod.
	if st.c.NodeCalls() {
		ni, err := pl.nodeInfo(nodeName, pod)
		if err != nil {
			return fwk.AsStatus(err)
		}
		st.reserved = ni.Snapshot()
	}
	return pl.nodeCall(ctx, st, abiv1.Point_POINT_RESERVE, nodeName)
}

// Unreserve uncounts the pod from the tenant usage (unless the informer
// saw it bound) and tells policies the reservation was undone; they may
// reject other pods waiting at Permit (a gang releasing its members).
func (pl *Plugin) Unreserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) {
	pl.cluster.forget(pod)
	st, err := getState(cs)
	if err != nil {
		return
	}
	pl.forget(pod)
	if !st.c.Implements(abiv1.Point_POINT_UNRESERVE) {
		return
	}
	ni, err := pl.boundNode(st, nodeName)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Unreserve: node not found", "node", nodeName)
		return
	}
	_, acts := st.c.NodeCall(ctx, abiv1.Point_POINT_UNRESERVE, ni, pl.waiting())
	for _, a := range acts {
		pl.apply(a, false)
	}
}

// preBindPreFlight skips PreBind when no policy exports it. The framework
// method around it has a signature per Kubernetes minor (preflight*.go).
func preBindPreFlight(cs fwk.CycleState) *fwk.Status {
	st, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if st.c.Implements(abiv1.Point_POINT_PRE_BIND) {
		return nil
	}
	return fwk.NewStatus(fwk.Skip)
}

// PreBind runs policies' PreBind; a rejection aborts the binding.
func (pl *Plugin) PreBind(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	st, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	return pl.nodeCall(ctx, st, abiv1.Point_POINT_PRE_BIND, nodeName)
}

// PostBind informs policies of a binding.
func (pl *Plugin) PostBind(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) {
	pl.forget(pod)
	pl.rejected.forget(pod.UID)
	st, err := getState(cs)
	if err != nil {
		return
	}
	_ = pl.nodeCall(ctx, st, abiv1.Point_POINT_POST_BIND, nodeName)
}

// nodeCall runs pt on the bound node in every policy that exports it.
func (pl *Plugin) nodeCall(ctx context.Context, st *cycleState, pt abiv1.Point, nodeName string) *fwk.Status {
	if !st.c.Implements(pt) {
		return nil
	}
	ni, err := pl.boundNode(st, nodeName)
	if err != nil {
		return fwk.AsStatus(err)
	}
	s, _ := st.c.NodeCall(ctx, pt, ni, nil)
	pl.noteRejection(st, s)
	return toStatus(s)
}

// boundNode is the node for Reserve and the binding phase: the copy taken
// at Reserve when there is one.
func (pl *Plugin) boundNode(st *cycleState, name string) (fwk.NodeInfo, error) {
	if st.reserved != nil && st.reserved.Node() != nil && st.reserved.Node().Name == name {
		return st.reserved, nil
	}
	return pl.nodeInfo(name, st.c.Pod())
}

// nodeInfo finds a node in the current snapshot.
func (pl *Plugin) nodeInfo(name string, pod *v1.Pod) (fwk.NodeInfo, error) {
	ni, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(name)
	if err != nil {
		return nil, fmt.Errorf("%s: node %s for pod %s/%s: %w", Name, name, pod.Namespace, pod.Name, err)
	}
	return ni, nil
}
