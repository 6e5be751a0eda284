package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/source"
)

// collect deletes the content-addressed chunk ConfigMaps (label
// source.LabelModule) of the namespace that no SchedulingPolicy refers to
// and that were created more than grace before now, printing a line per
// ConfigMap deleted. A module is referred to by a policy's spec.module,
// status.serving, status.lastGood and the first keep entries of its
// status.history, and what any replica serves (status.replicas): what it
// serves, what it would fall back to and what `wasmsched rollback` offers
// first.
//
// The grace period is what makes concurrent pushes safe: a push writes its
// chunks before the policy that names them, so fresh chunks nothing names
// yet are another push in flight, not garbage. Deletes carry the UID read,
// so a chunk deleted and written again meanwhile is left alone.
func collect(ctx context.Context, c *cluster, keep int, grace time.Duration, now time.Time, out io.Writer) error {
	list, err := c.policies().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("collect unreferenced modules: list schedulingpolicies in %s: %w", c.namespace, err)
	}
	refs := map[string]bool{}
	for i := range list.Items {
		sp, err := api.FromUnstructured(&list.Items[i])
		if err != nil {
			// Not readable: do not guess what it refers to.
			return fmt.Errorf("collect unreferenced modules: %w", err)
		}
		for _, d := range referenced(sp, keep) {
			refs[api.ModuleName(d)] = true
		}
	}
	cmAPI := c.client.CoreV1().ConfigMaps(c.namespace)
	cms, err := cmAPI.List(ctx, metav1.ListOptions{LabelSelector: source.LabelModule})
	if err != nil {
		return fmt.Errorf("collect unreferenced modules: list configmaps in %s: %w", c.namespace, err)
	}
	sort.Slice(cms.Items, func(i, j int) bool { return cms.Items[i].Name < cms.Items[j].Name })
	for _, cm := range cms.Items {
		module := cm.Labels[source.LabelModule]
		if !api.IsModuleName(module) || refs[module] || now.Sub(cm.CreationTimestamp.Time) < grace {
			continue
		}
		uid := cm.UID
		err := cmAPI.Delete(ctx, cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			continue // gone, or replaced: someone else's business
		}
		if err != nil {
			return fmt.Errorf("delete unreferenced configmap %s/%s: %w", c.namespace, cm.Name, err)
		}
		fmt.Fprintf(out, "configmap/%s deleted (module not referenced)\n", cm.Name)
	}
	return nil
}

// referenced lists the module digests sp refers to whose bytes are in
// chunks.
func referenced(sp *api.SchedulingPolicy, keep int) []string {
	var out []string
	add := func(m api.Module) {
		if m.SHA256 != "" && m.URL == "" && m.File == "" {
			out = append(out, m.SHA256)
		}
	}
	add(sp.Spec.Module)
	if r := sp.Status.Serving; r != nil {
		add(r.Module)
	}
	if r := sp.Status.LastGood; r != nil {
		add(r.Module)
	}
	for i, h := range sp.Status.History {
		if i >= keep {
			break
		}
		add(h.Module)
	}
	// What each replica serves: a replica may serve another revision than
	// the lease holder (a fallback, a quarantine) and must be able to
	// restart on it.
	for _, r := range sp.Status.Replicas {
		if api.ValidSHA256(r.SHA256) {
			out = append(out, r.SHA256)
		}
	}
	return out
}
