package plugin

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/wasmsched/wasmsched/host/lifecycle"
	"github.com/wasmsched/wasmsched/host/policy"
)

var _ fwk.SignPlugin = &Plugin{}

// signFragmentPrefix starts the key of each policy's signature fragment.
const signFragmentPrefix = "wasmsched.io/policy/"

// versionID tells versions apart, settings included: the module's digest
// and when the version was loaded.
func versionID(v *policy.Policy) string {
	return fmt.Sprintf("%s@%d", v.Digest(), v.LoadedAt().UnixNano())
}

// policySignature is the value of a policy's fragment: the version that
// signed and what it made of the pod. Pods signed by different versions
// never share a signature.
type policySignature struct {
	Version string `json:"version"`
	Pod     []byte `json:"pod"`
}

// SignPod implements fwk.SignPlugin, which keeps the scheduler's
// opportunistic batching on for the profile: one fragment per enforcing
// policy, from what the policy declared it reads of the pod or from its own
// Sign. A policy that declares nothing, a Sign that refuses, or a required
// policy without a version makes the pod unsignable (Unschedulable), which
// only turns batching off for that pod. Shadow policies do not decide
// placements and do not sign.
//
// The framework signs a pod when it enters or changes in the queue, with
// the versions current then; a version serving later judges by its own
// declarations, and the scheduler re-runs Filter on every node it reuses,
// so a swap between signing and scheduling can cost a batched pod its best
// score, never a node that does not fit.
func (pl *Plugin) SignPod(ctx context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	r := pl.lcRoster()
	if len(r.Blocked) > 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("policy %s cannot serve", r.Blocked[0].Name))
	}
	out := make([]fwk.SignFragment, 0, len(r.Slots))
	for _, s := range r.Slots {
		a := s.Args()
		if a.Mode == lifecycle.ModeShadow {
			continue
		}
		v := s.Current()
		if v == nil {
			if s.BlocksWithoutVersion() {
				return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("policy %s has no version", a.Name))
			}
			continue
		}
		sig, ok, reason, err := v.Sign(ctx, pod)
		if err != nil {
			return nil, fwk.AsStatus(err)
		}
		if !ok {
			return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("policy %s: %s", a.Name, reason))
		}
		out = append(out, fwk.SignFragment{Key: signFragmentPrefix + a.Name, Value: policySignature{Version: versionID(v), Pod: sig}})
	}
	return out, nil
}
