//go:build k8s1.36

package plugin

import (
	"context"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
)

// newEvaluator: from 1.36 an Executor evicts.
func newEvaluator(h fwk.Handle, p *preemptor, fts feature.Features) *preemption.Evaluator {
	return preemption.NewEvaluator(Name, h, p, preemption.NewExecutor(h, fts))
}

// SelectVictimsOnNode implements preemption.Interface (1.36 signature).
func (p *preemptor) SelectVictimsOnNode(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo, pdbs []*policyv1.PodDisruptionBudget) ([]*v1.Pod, int, *fwk.Status) {
	return p.selectVictims(ctx, cs, pod, ni, pdbs)
}
