package plugin

import (
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/policy"
)

// groupPods keeps the pods of the last pod-group cycle converted to the
// ABI. The framework scores each placement of a cycle in a call of its own,
// with the same pods; converting them at every call was most of the host's
// PlacementScore time (issue 38).
type groupPods struct {
	mu   sync.Mutex
	pods []*v1.Pod
	msgs []*abiv1.Pod
}

// get returns pods converted, from the cache when it holds the same pod
// objects in the same order. The scheduler replaces a pod's object when
// the pod changes, never edits it, so the same objects convert alike.
func (c *groupPods) get(pods []*v1.Pod) []*abiv1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.msgs == nil || !slices.Equal(c.pods, pods) {
		c.pods, c.msgs = slices.Clone(pods), policy.ConvertPods(pods)
	}
	return c.msgs
}
