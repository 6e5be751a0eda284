package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/wasmsched/wasmsched/host/lifecycle"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// selections are the scheduler profiles that select SchedulingPolicies in
// a namespace, as they publish themselves in its status ConfigMap
// (host/plugin/selection.go). Empty: no scheduler publishes one (none
// runs with schedulingPolicies in this namespace, or it predates the
// publication): nothing can then be said of whether a policy is selected.
type selections []lifecycle.ProfileReport

// readSelections reads the profiles' selections of c's namespace. A
// missing ConfigMap is no selection; another failure is returned.
func (c *cluster) readSelections(ctx context.Context) (selections, error) {
	cm, err := c.client.CoreV1().ConfigMaps(c.namespace).Get(ctx, lifecycle.StatusConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", c.namespace, lifecycle.StatusConfigMap, err)
	}
	var out selections
	for _, raw := range cm.Data {
		var r lifecycle.ProfileReport
		if json.Unmarshal([]byte(raw), &r) == nil && r.Selection != nil {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Profile != out[j].Profile {
			return out[i].Profile < out[j].Profile
		}
		return out[i].Replica < out[j].Replica
	})
	return out, nil
}

// notSelected returns why no profile selects the SchedulingPolicy name
// with labels lbls: every profile's selection, and the --label that a
// label selector would match. It returns "" when a profile selects it or
// when no profile publishes its selection.
func (s selections) notSelected(name string, lbls map[string]string) string {
	if len(s) == 0 {
		return ""
	}
	var how []string
	seen := map[string]bool{}
	var hint string
	for _, r := range s {
		if r.Selects(name, lbls) {
			return ""
		}
		h := describeSelection(r.Selection)
		if seen[r.Profile+h] {
			continue
		}
		seen[r.Profile+h] = true
		how = append(how, fmt.Sprintf("profile %s (replica %s) selects %s", r.Profile, r.Replica, h))
		if hint == "" {
			hint = labelHint(r.Selection)
		}
	}
	msg := fmt.Sprintf("no scheduler profile selects schedulingpolicy %s: %s", name, strings.Join(how, "; "))
	if hint != "" {
		msg += "; " + hint
	}
	return msg
}

// describeSelection is a selection in words.
func describeSelection(sel *lifecycle.PolicySelection) string {
	if len(sel.Names) > 0 {
		return "by name: " + strings.Join(sel.Names, ", ")
	}
	if sel.Selector == nil {
		return "nothing"
	}
	return "the labels " + metav1.FormatLabelSelector(sel.Selector)
}

// labelHint is the push flag that makes a policy match a selector made of
// matchLabels only, or what to change when the profile selects by name.
func labelHint(sel *lifecycle.PolicySelection) string {
	if len(sel.Names) > 0 {
		return "add the policy's name to the profile's schedulingPolicies.names in the scheduler configuration"
	}
	if sel.Selector == nil || len(sel.Selector.MatchExpressions) > 0 || len(sel.Selector.MatchLabels) == 0 {
		return ""
	}
	keys := make([]string, 0, len(sel.Selector.MatchLabels))
	for k := range sel.Selector.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	flags := make([]string, len(keys))
	for i, k := range keys {
		flags[i] = "--label " + k + "=" + sel.Selector.MatchLabels[k]
	}
	return "push it with " + strings.Join(flags, " ")
}
