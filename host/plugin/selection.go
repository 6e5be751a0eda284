package plugin

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
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

// publishSelection publishes the profile's selection until ctx ends.
func publishSelection(ctx context.Context, h fwk.Handle, args *Args) {
	if h == nil || h.ClientSet() == nil || args.SchedulingPolicies == nil {
		return
	}
	w := newStatusWriter(h, args.Namespace, profileName(h))
	w.replica = replicaName()
	w.key = unsafeKey.ReplaceAllString(w.replica+"."+w.profile, "_") + ".json"
	report := ProfileReport{Status: Status{Replica: w.replica, Profile: w.profile, Policies: []SlotStatus{}},
		Selection: args.SchedulingPolicies.DeepCopy()}
	wake := make(chan struct{}, 1)
	wake <- struct{}{}
	writeLoop(ctx, wake, nil, func(ctx context.Context) error {
		report.Updated = time.Now().UTC()
		err := writeStatusKey(ctx, w, report)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Could not publish the profile's policy selection; retrying", "configMap", w.namespace+"/"+StatusConfigMap, "err", err)
		}
		return err
	})
}

// writeStatusKey writes v as w's key of StatusConfigMap, pruning the keys
// of replicas gone.
func writeStatusKey(ctx context.Context, w *statusWriter, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	cms := w.client.CoreV1().ConfigMaps(w.namespace)
	for range 3 {
		cm, err := cms.Get(ctx, StatusConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: StatusConfigMap, Namespace: w.namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "wasmsched"}}, Data: map[string]string{w.key: string(b)}}
			if _, err = cms.Create(ctx, cm, metav1.CreateOptions{}); err == nil || !apierrors.IsAlreadyExists(err) {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[w.key] = string(b)
		w.prune(cm.Data, time.Now())
		if _, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err == nil || !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}
