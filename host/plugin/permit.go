package plugin

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/compose"
	"github.com/wasmsched/wasmsched/host/convert"
)

// Permit allows the pod only if every policy allows it; a Wait from any
// policy parks it for the longest timeout asked. Policies' verdicts on other
// waiting pods are applied only once every policy has answered: rejections
// always, allowances only if no policy rejected this pod (a gang must not
// bind without the member whose Permit failed). A waiting pod is let go
// only when every policy that made it wait has allowed it.
func (pl *Plugin) Permit(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	st, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err), 0
	}
	defer st.c.Policy.ReleaseSnapshot()
	if !st.c.Implements(abiv1.Point_POINT_PERMIT) {
		return nil, 0
	}
	ni, err := pl.nodeInfo(nodeName, pod)
	if err != nil {
		return fwk.AsStatus(err), 0
	}
	res := st.c.Permit(ctx, ni, pl.waiting())
	pl.noteRejection(st, res.Status)
	allowed := res.Status == nil || res.Status.Code == abiv1.Code_CODE_WAIT
	for _, a := range res.Actions {
		pl.apply(a, allowed)
	}
	if res.Wait > 0 {
		pl.waits.Store(pod.UID, newWaitSet(res.WaitFor))
		return toStatus(res.Status), res.Wait
	}
	return toStatus(res.Status), 0
}

// waitSet is the policies a waiting pod still waits for.
type waitSet struct {
	mu      sync.Mutex
	pending map[string]bool
}

func newWaitSet(names []string) *waitSet {
	w := &waitSet{pending: map[string]bool{}}
	for _, n := range names {
		w.pending[n] = true
	}
	return w
}

// allow records that a policy allowed the pod and reports whether none is
// left waiting.
func (w *waitSet) allow(policyName string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pending, policyName)
	return len(w.pending) == 0
}

// forget drops the wait bookkeeping of a pod that left Permit.
func (pl *Plugin) forget(pod *v1.Pod) { pl.waits.Delete(pod.UID) }

// apply carries out a policy's verdicts on waiting pods: rejections always,
// allowances when allowed is true and the pod waits for no other policy.
func (pl *Plugin) apply(a compose.Actions, allowed bool) {
	for _, act := range a.Actions {
		uid := types.UID(act.Uid)
		wp := pl.handle.GetWaitingPod(uid)
		if wp == nil {
			continue
		}
		if !act.Allow {
			reason := act.Reason
			if reason == "" {
				reason = a.Entry.Name + ": rejected while waiting"
			}
			pl.waits.Delete(uid)
			pl.rejected.addPod(wp.GetPod(), a.Entry.Name)
			wp.Reject(Name, reason)
			continue
		}
		if !allowed {
			continue
		}
		if v, ok := pl.waits.Load(uid); ok && !v.(*waitSet).allow(a.Entry.Name) {
			continue // another policy still holds it
		}
		pl.waits.Delete(uid)
		wp.Allow(Name)
	}
}

// waiting lists the pods waiting at Permit in this profile.
func (pl *Plugin) waiting() []*abiv1.WaitingPod {
	var out []*abiv1.WaitingPod
	var mu sync.Mutex
	pl.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		p := wp.GetPod()
		mu.Lock()
		out = append(out, convert.WaitingPod(p, p.Spec.NodeName))
		mu.Unlock()
	})
	return out
}
