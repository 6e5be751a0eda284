package explain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/lifecycle"
	"github.com/wasmsched/wasmsched/host/source"
)

// Static policies (the plugin arguments' `policies:` list).
//
// The CLI cannot read the scheduler's arguments, so it reads what the
// scheduler publishes of them: each replica's report of a profile in
// lifecycle.StatusConfigMap lists its static policies in order with their
// mode, weight, failure policy and source; the state each keeps in
// lifecycle.StateConfigMap (key lifecycle.StateKey) holds the revision
// serving (settings, limits), the last good one, the history and the
// conditions. The module serving is then looked for where the scheduler
// looks for it: what its source holds now (ConfigMaps, a file on this
// machine, the pinned URL or OCI artifact) when that is the digest
// serving, else the module cache of this machine (the scheduler's, when it
// runs here), else content-addressed chunks in the namespace.

// staticReport is the freshest report of profile with static policies, or
// nil when no replica publishes one (the profile selects SchedulingPolicies,
// or does not run WasmPolicy).
func (c *Client) staticReport(ctx context.Context, profile string) (*lifecycle.ProfileReport, error) {
	cm, err := c.Kube.CoreV1().ConfigMaps(c.Namespace).Get(ctx, lifecycle.StatusConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, Rights(err, "get", "configmaps", c.Namespace)
	}
	var best *lifecycle.ProfileReport
	var selects time.Time // the newest report of the profile selecting SchedulingPolicies
	for _, raw := range cm.Data {
		var r lifecycle.ProfileReport
		if json.Unmarshal([]byte(raw), &r) != nil || r.Profile != profile {
			continue
		}
		if r.Selection != nil {
			if r.Updated.After(selects) {
				selects = r.Updated
			}
			continue
		}
		if len(r.Policies) > 0 && (best == nil || r.Updated.After(best.Updated)) {
			best = &r
		}
	}
	if best != nil && selects.After(best.Updated) {
		// The profile was reconfigured to select SchedulingPolicies; the
		// static report is a replica's from before, not yet pruned.
		return nil, nil
	}
	return best, nil
}

// readStaticProfile is the profile's static policies as rep reports them,
// each with the revision its state says serves.
func (c *Client) readStaticProfile(ctx context.Context, rep *lifecycle.ProfileReport) (*Profile, error) {
	cm, err := c.Kube.CoreV1().ConfigMaps(c.Namespace).Get(ctx, lifecycle.StateConfigMap, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, Rights(err, "get", "configmaps", c.Namespace)
	}
	out := &Profile{Name: rep.Profile, Static: true, Replica: rep.Replica}
	for _, s := range rep.Policies {
		if s.Mode == lifecycle.ModeShadow {
			out.Shadows = append(out.Shadows, s.Policy)
			continue
		}
		var st api.SchedulingPolicyStatus
		key := lifecycle.StateKey(rep.Profile, s.Policy)
		if cm != nil {
			if raw, ok := cm.Data[key]; ok {
				if err := json.Unmarshal([]byte(raw), &st); err != nil {
					return nil, fmt.Errorf("static policy %s: its state in %s/%s (key %s) is damaged: %w", s.Policy, c.Namespace, lifecycle.StateConfigMap, key, err)
				}
			}
		}
		if st.Serving == nil {
			why := "no revision serves"
			for _, cond := range st.Conditions {
				if cond.Type == api.ConditionReady && cond.Message != "" {
					why += ": " + cond.Reason + ": " + cond.Message
				}
			}
			if len(st.Conditions) == 0 {
				why += fmt.Sprintf(" (no state in %s/%s, key %s, yet)", c.Namespace, lifecycle.StateConfigMap, key)
			}
			out.Skipped = append(out.Skipped, Skipped{Name: s.Policy, Reason: why + " (the scheduler runs the pod without it)"})
			continue
		}
		w := s.Weight
		if w <= 0 {
			w = 1
		}
		fp := string(s.FailurePolicy)
		if fp == "" {
			fp = string(api.FailurePolicyFail)
		}
		p := Policy{Name: s.Policy, Revision: *st.Serving, Weight: w, FailurePolicy: fp, isStatic: true, static: s.Source}
		if s.Source != nil {
			p.Source = describeSource(*s.Source)
		}
		add := func(r *api.Revision) {
			for _, have := range p.revisions {
				if have.Key == r.Key {
					return
				}
			}
			p.revisions = append(p.revisions, *r)
		}
		add(st.Serving)
		if st.LastGood != nil {
			add(st.LastGood)
		}
		for i := range st.History {
			add(&st.History[i].Revision)
		}
		out.Policies = append(out.Policies, p)
	}
	return out, nil
}

func describeSource(s lifecycle.Source) string {
	switch {
	case s.ConfigMap != "":
		return "configMap " + s.ConfigMap
	case s.URL != "":
		return "url " + s.URL
	case s.OCI != "":
		return "oci " + s.OCI
	}
	return "file " + s.File
}

// fetchStatic finds the module sha256 of a static policy whose source is
// src (nil when the scheduler did not publish it), as the scheduler would:
// its source when it holds that module, else the module cache, else
// content-addressed chunks. The error says where it looked.
func (c *Client) fetchStatic(ctx context.Context, name string, src *lifecycle.Source, sha256 string) ([]byte, error) {
	var errs []error
	if src != nil {
		v, err := c.fromSource(ctx, name, *src, sha256)
		if err == nil {
			return v.Module, nil
		}
		if IsRights(err) {
			return nil, err
		}
		errs = append(errs, err)
	}
	for _, cache := range localModuleCaches() {
		v, err := cache.Get(sha256)
		if err == nil {
			return v.Module, nil
		}
		errs = append(errs, err)
	}
	v, err := source.FetchModule(ctx, c.Kube, c.Namespace, sha256)
	if err == nil {
		return v.Module, nil
	}
	if apierrors.IsForbidden(err) {
		return nil, Rights(err, "get", "configmaps", c.Namespace)
	}
	errs = append(errs, err)
	return nil, fmt.Errorf("the module serving (sha256 %s) is no longer where the scheduler's arguments point, and is neither in this machine's module cache nor stored content-addressed in %s (the scheduler may hold it in its own module cache only): give it with --policy %s=FILE.wasm: %w",
		sha256, c.Namespace, name, errors.Join(errs...))
}

// fromSource reads what src holds now and checks it is sha256.
func (c *Client) fromSource(ctx context.Context, name string, src lifecycle.Source, sha256 string) (source.Version, error) {
	switch {
	case src.ConfigMap != "":
		sel := labels.SelectorFromSet(labels.Set{source.LabelPolicy: src.ConfigMap}).String()
		l, err := c.Kube.CoreV1().ConfigMaps(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return source.Version{}, Rights(err, "list", "configmaps", c.Namespace)
		}
		cms := make([]*v1.ConfigMap, len(l.Items))
		for i := range l.Items {
			cms[i] = &l.Items[i]
		}
		module, digest, err := source.Assemble(src.ConfigMap, cms)
		switch {
		case err != nil:
			return source.Version{}, fmt.Errorf("configMap %s: %w", src.ConfigMap, err)
		case digest != sha256:
			return source.Version{}, fmt.Errorf("configMap %s now holds module %s, not the one serving (a newer upload the scheduler refused or has not loaded yet)", src.ConfigMap, api.ShortDigest(digest))
		}
		return source.Version{Module: module, Digest: digest}, nil
	case src.URL != "":
		return source.FetchURL(ctx, src.URL, sha256)
	case src.OCI != "":
		return source.FetchOCI(ctx, src.OCI, sha256, source.OCIOptions{Keychain: authn.DefaultKeychain})
	case src.File != "":
		v, err := source.ReadFile(src.File, sha256)
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("file %s is on the scheduler's machine, not this one: %w", src.File, err)
		}
		return v, err
	}
	return source.Version{}, fmt.Errorf("policy %s: no source published", name)
}

// localModuleCaches are the module caches a scheduler running on this
// machine keeps (lifecycle.DefaultModuleCache's directories) that exist.
// They are only read.
func localModuleCaches() []*source.Cache {
	var dirs []string
	if d := os.Getenv("WASMSCHED_CACHE_DIR"); d != "" {
		dirs = append(dirs, filepath.Join(d, "modules"))
	}
	if base, err := os.UserCacheDir(); err == nil {
		dirs = append(dirs, filepath.Join(base, "wasmsched", "modules"))
	}
	var out []*source.Cache
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			if c, err := source.OpenCache(d); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}
