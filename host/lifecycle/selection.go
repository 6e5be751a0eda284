package lifecycle

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// A profile that selects SchedulingPolicies publishes how it selects them,
// so that `wasmsched push` and `wasmsched status` can tell an author that
// no profile selects a policy (a label that matches no profile's selector
// is otherwise silent: the policy is simply never loaded).
//
// The report is a key of StatusConfigMap, the same key a profile with
// static policies writes its Status under (a profile is one or the other),
// with Selection set and no Policies: the policies it serves are in each
// SchedulingPolicy's status.replicas. It is refreshed every statusHeartbeat
// and pruned, like every key of that ConfigMap, when not refreshed for
// replicaExpiry.

// ProfileReport is a report in StatusConfigMap: a Status, and for a
// profile that selects SchedulingPolicies, how it selects them.
type ProfileReport struct {
	Status
	// Selection is the profile's schedulingPolicies argument; nil for a
	// profile with static policies.
	Selection *PolicySelection `json:"selection,omitempty"`
}

// Selects reports whether the profile selects the SchedulingPolicy called
// name with labels lbls (in the namespace of the ConfigMap the report was
// read from).
func (r *ProfileReport) Selects(name string, lbls map[string]string) bool {
	switch sel := r.Selection; {
	case sel == nil:
		return false
	case len(sel.Names) > 0:
		return slices.Contains(sel.Names, name)
	case sel.Selector != nil:
		s, err := metav1.LabelSelectorAsSelector(sel.Selector)
		return err == nil && s.Matches(labels.Set(lbls))
	}
	return false
}
