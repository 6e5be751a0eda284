package main

import "fmt"

// Name is the policy's name; every rejection reason starts with it.
const Name = "gpu"

// Strategy is how Score places GPU pods among the nodes that fit them.
type Strategy string

const (
	// Binpack prefers the node left with the fewest free GPUs after the pod
	// is placed, keeping whole nodes free for large jobs.
	Binpack Strategy = "binpack"
	// Spread prefers the node left with the most free GPUs, spreading load
	// and failure risk.
	Spread Strategy = "spread"
)

// Settings are the operator's settings, as JSON:
//
//	{"strategy": "binpack", "reserveGPUNodes": true}
//
// DefaultSettings gives the defaults; fields left out keep them.
type Settings struct {
	// Strategy is "binpack" (default) or "spread".
	Strategy Strategy `json:"strategy"`
	// ReserveGPUNodes (default true) scores nodes with GPUs 0 and nodes
	// without 100 for pods that request no GPU, so that those pods leave
	// GPU nodes to the pods that need them. It never rejects a node.
	ReserveGPUNodes bool `json:"reserveGPUNodes"`
}

// DefaultSettings returns the settings used where the operator gives none.
func DefaultSettings() Settings {
	return Settings{Strategy: Binpack, ReserveGPUNodes: true}
}

// Validate reports the first invalid setting.
func (s Settings) Validate() error {
	switch s.Strategy {
	case Binpack, Spread:
		return nil
	}
	return fmt.Errorf("settings: \"strategy\" must be %q or %q, not %q", Binpack, Spread, s.Strategy)
}
