// Command topology is a wasmsched policy that places a gang of GPU pods (a
// PodGroup) within one topology domain: the nodes sharing a value of a
// topology label, such as a rack or an NVLink domain (GPU Feature
// Discovery's nvidia.com/gpu.clique). It proposes, in a pod-group cycle,
// one placement per domain that holds the whole gang, prefers the tightest
// of them, never splits a gang across domains unless the settings allow
// it, and says why when no domain fits. README.md has the rules and
// settings, and a comparison with the scheduler's built-in topology-aware
// placement.
//
// The logic lives in topology.go, tested natively; this file registers it.
package main

import "github.com/wasmsched/wasmsched/guest"

var policy *Policy

func init() {
	guest.Register(&guest.Policy{
		Name: Name,
		Settings: func(raw []byte) (err error) {
			policy, err = guest.Load(raw, DefaultSettings(), New)
			return err
		},
		WantsPodGroups: true,
		PlacementGenerate: func(g *guest.Group, parent guest.Placement) ([]guest.Placement, guest.Status) {
			return policy.Generate(g, parent)
		},
		PlacementScore:          func(g *guest.Group, p *guest.PlacementAssignment) (int64, guest.Status) { return policy.Score(g, p) },
		NormalizePlacementScore: func(g *guest.Group, scores []guest.PlacementScore) guest.Status { return policy.Normalize(g, scores) },
		PodGroupPostFilter: func(g *guest.Group, f *guest.GroupFailure) ([]guest.Nomination, guest.Status) {
			return policy.Explain(g, f)
		},
	})
}

func main() {}
