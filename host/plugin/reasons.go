package plugin

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// MaxPodReasons bounds, in bytes, the distinct reasons the plugin's Filter
// returns for one pod in one scheduling cycle, each charged 8 bytes more
// for the framework's count and separator; past it a node's new reasons are
// replaced by one line per policy (hiddenReasons).
//
// When no node fits, the framework writes every distinct reason of every
// node into the pod's PodScheduled condition ("0/150 nodes are available:
// 1 <reason>, 1 <reason>, ..."). A policy that rejects each node with its
// own reasons (up to 16 of 1 KiB per verdict: engine.MaxReasons,
// engine.MaxReasonBytes) made that message 2.4 MB for 150 nodes, and the
// status update failed, leaving the pod with no reason at all: "rpc error:
// code = ResourceExhausted desc = trying to send message larger than max
// (2410390 vs. 2097152)". The pod is written to etcd whole; the API
// server's etcd client sends at most 2 MiB, etcd accepts 1.5 MiB by
// default, the API server takes request bodies up to 3 MiB.
//
// 32 KiB holds two verdicts of 16 full reasons or hundreds of ordinary
// ones, keeps the pod far below those limits with room for other plugins'
// reasons, and stays cheap to carry in every watch of pods. Preemption's
// summary, appended to the same message, can repeat these reasons once (its
// dry runs call Filter again with the same cycle state), so the plugin's
// share of a message stays under twice the budget plus one line per policy.
const MaxPodReasons = 32 << 10

// reasonOverhead is what the framework adds to each distinct reason when it
// prints it: ", " before it and a node count of up to five digits and a
// space in front. Charging it keeps many tiny reasons within the budget too.
const reasonOverhead = 8

// hiddenReasons is the reason that stands for a node's new reasons once the
// budget is spent, after "<policy>: ". The framework prints it once with the
// number of nodes it stands for: "137 gpu: node(s) rejected, reasons not
// shown: ...". `wasmsched eval` with the pod and nodes exported from the
// cluster shows every reason.
var hiddenReasons = fmt.Sprintf("node(s) rejected, reasons not shown: this pod's %s reasons reached the %d KiB limit (wasmsched eval shows them all)",
	Name, MaxPodReasons>>10)

// reasonBudget counts the bytes of distinct reasons a pod's cycle has
// returned from Filter, up to MaxPodReasons. It lives in the cycle state,
// shared by the clones preemption takes. The zero value is ready; its
// methods are safe for concurrent use (Filter runs on up to 16 goroutines)
// and cost one map lookup for a reason seen before.
type reasonBudget struct {
	seen sync.Map     // reason -> struct{}: the reasons returned so far
	used atomic.Int64 // bytes charged for seen, at most MaxPodReasons
	// full: a reason did not fit; no new reason is returned after it, so
	// the reasons shown are the first ones.
	full atomic.Bool
}

// limit returns the verdict s of the named policy on a node of pod, with
// the reasons the cycle has not returned before and that do not fit in the
// budget replaced by one reason naming the policy. The code is kept; s
// itself is returned when nothing is replaced.
func (b *reasonBudget) limit(ctx context.Context, pod *v1.Pod, policyName string, s *fwk.Status) *fwk.Status {
	if s.IsSuccess() {
		return s
	}
	rs := s.Reasons()
	var out []string // nil until a reason is hidden
	for i, r := range rs {
		if b.admit(ctx, pod, policyName, r) {
			if out != nil {
				out = append(out, r)
			}
			continue
		}
		if out == nil {
			out = make([]string, i, len(rs))
			copy(out, rs[:i])
			out = append(out, policyName+": "+hiddenReasons)
		}
	}
	if out == nil {
		return s
	}
	ns := fwk.NewStatus(s.Code(), out...)
	if p := s.Plugin(); p != "" {
		ns.SetPlugin(p)
	}
	return ns
}

// admit reports whether reason may be returned: it was returned before in
// this cycle, or it fits in what is left of the budget (and is charged).
func (b *reasonBudget) admit(ctx context.Context, pod *v1.Pod, policyName, reason string) bool {
	if _, ok := b.seen.Load(reason); ok {
		return true
	}
	if b.full.Load() {
		return false
	}
	cost := int64(len(reason) + reasonOverhead)
	for {
		used := b.used.Load()
		if used+cost > MaxPodReasons {
			if b.full.CompareAndSwap(false, true) {
				klog.FromContext(ctx).V(2).Info("Filter reasons of the pod reached the limit, new ones are not shown",
					"pod", klog.KObj(pod), "policy", policyName, "limitBytes", MaxPodReasons)
			}
			return false
		}
		if b.used.CompareAndSwap(used, used+cost) {
			break
		}
	}
	if _, loaded := b.seen.LoadOrStore(reason, struct{}{}); loaded {
		b.used.Add(-cost) // another goroutine charged it meanwhile
	}
	return true
}
