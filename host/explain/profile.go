package explain

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/lifecycle"
	"github.com/wasmsched/wasmsched/host/source"
)

// Policy is one policy of a profile as explain runs it: the revision
// serving (or the what-if's), with the operator's weight, failure policy
// and order.
type Policy struct {
	Name          string       `json:"name"`
	Revision      api.Revision `json:"revision"`
	Weight        int64        `json:"weight"`
	FailurePolicy string       `json:"failurePolicy"`
	// WhatIf says where a what-if revision came from ("revision <digest>"
	// or "file <path>"); "" for the serving one.
	WhatIf string `json:"whatIf,omitempty"`
	// Source is where a static policy's module comes from, as its
	// arguments say ("configMap gpu", "file /path", "url ...", "oci
	// ..."); "" for a SchedulingPolicy.
	Source string `json:"source,omitempty"`
	// wasm is the module, set once fetched (or read from a what-if file).
	wasm []byte
	// static is a static policy's source as the scheduler publishes it
	// (nil for a SchedulingPolicy, or when not published); revisions are
	// a static policy's revisions from its state (serving, last good,
	// history).
	isStatic  bool
	static    *lifecycle.Source
	revisions []api.Revision
}

// Short is the policy's module digest as the output shows it.
func (p *Policy) Short() string { return api.ShortDigest(p.Revision.Module.SHA256) }

// Skipped is a policy of the profile explain could not run, and why.
type Skipped struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Profile is the enforcing policies of one scheduler profile, in the
// scheduler's order (spec.order, then name), and those skipped.
type Profile struct {
	Name string `json:"name"`
	// Static: the policies are the plugin arguments' `policies:` list, as
	// the scheduler replica Replica reports them (else SchedulingPolicies).
	Static   bool      `json:"static,omitempty"`
	Replica  string    `json:"replica,omitempty"`
	Policies []Policy  `json:"policies"`
	Skipped  []Skipped `json:"skipped,omitempty"`
	// Shadows are the profile's shadow policies: they never decide, and
	// explain leaves them out.
	Shadows []string `json:"shadows,omitempty"`
}

// ErrNoWasmPolicy is a profile no WasmPolicy serves.
type ErrNoWasmPolicy struct{ Profile, Namespace string }

func (e *ErrNoWasmPolicy) Error() string {
	return fmt.Sprintf("no scheduler replica reports static policies of profile %q in %s/%s, and no SchedulingPolicy in namespace %s is served by it (its status lists no replica of that profile): the pod's profile does not run WasmPolicy, or its policies live in another namespace (--scheduler-namespace)", e.Profile, e.Namespace, lifecycle.StatusConfigMap, e.Namespace)
}

// ReadProfile reads the policies serving profile: its static policies,
// when a scheduler replica reports them in lifecycle.StatusConfigMap
// (static.go), else the SchedulingPolicies of c.Namespace that a replica
// reports serving for profile (status.replicas[].profile). A policy with
// no serving revision is listed in Skipped with the scheduler's own Ready
// message.
func (c *Client) ReadProfile(ctx context.Context, profile string) (*Profile, error) {
	rep, err := c.staticReport(ctx, profile)
	if err != nil {
		return nil, err
	}
	if rep != nil {
		return c.readStaticProfile(ctx, rep)
	}
	l, err := c.Dynamic.Resource(api.GVR).Namespace(c.Namespace).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("the API server does not serve SchedulingPolicies (is the CRD %s installed?): %w", api.CRDName, err)
	}
	if err != nil {
		return nil, Rights(err, "list", "schedulingpolicies.wasmsched.io", c.Namespace)
	}
	var sps []*api.SchedulingPolicy
	for i := range l.Items {
		sp, err := api.FromUnstructured(&l.Items[i])
		if err != nil {
			return nil, fmt.Errorf("SchedulingPolicy %s/%s: %w", c.Namespace, l.Items[i].GetName(), err)
		}
		for _, r := range sp.Status.Replicas {
			if r.Profile == profile {
				sps = append(sps, sp)
				break
			}
		}
	}
	if len(sps) == 0 {
		return nil, &ErrNoWasmPolicy{Profile: profile, Namespace: c.Namespace}
	}
	sort.Slice(sps, func(i, j int) bool {
		if sps[i].Spec.Order != sps[j].Spec.Order {
			return sps[i].Spec.Order < sps[j].Spec.Order
		}
		return sps[i].Name < sps[j].Name
	})
	out := &Profile{Name: profile}
	for _, sp := range sps {
		if sp.Spec.Mode == api.ModeShadow {
			out.Shadows = append(out.Shadows, sp.Name)
			continue
		}
		if sp.Status.Serving == nil {
			why := "no revision serves"
			for _, cond := range sp.Status.Conditions {
				if cond.Type == api.ConditionReady && cond.Message != "" {
					why += ": " + cond.Reason + ": " + cond.Message
				}
			}
			out.Skipped = append(out.Skipped, Skipped{Name: sp.Name, Reason: why + " (the scheduler runs the pod without it)"})
			continue
		}
		fp := string(sp.Spec.FailurePolicy)
		if fp == "" {
			fp = string(api.FailurePolicyFail)
		}
		w := sp.Spec.Weight
		if w <= 0 {
			w = 1
		}
		out.Policies = append(out.Policies, Policy{Name: sp.Name, Revision: *sp.Status.Serving, Weight: w, FailurePolicy: fp})
	}
	return out, nil
}

// Revisions are the revisions of a policy of prof a what-if may name:
// serving, last good, history, and (for a SchedulingPolicy) the spec's.
func (c *Client) Revisions(ctx context.Context, prof *Profile, name string) ([]api.Revision, error) {
	if prof.Static {
		for _, p := range prof.Policies {
			if p.Name == name {
				return p.revisions, nil
			}
		}
		return nil, fmt.Errorf("policy %q does not serve profile %s", name, prof.Name)
	}
	u, err := c.Dynamic.Resource(api.GVR).Namespace(c.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, Rights(err, "get", "schedulingpolicies.wasmsched.io", c.Namespace)
	}
	sp, err := api.FromUnstructured(u)
	if err != nil {
		return nil, err
	}
	var out []api.Revision
	seen := map[string]bool{}
	add := func(r api.Revision) {
		if !seen[r.Key] {
			seen[r.Key] = true
			out = append(out, r)
		}
	}
	if sp.Status.Serving != nil {
		add(*sp.Status.Serving)
	}
	add(api.SpecRevision(sp))
	if sp.Status.LastGood != nil {
		add(*sp.Status.LastGood)
	}
	for _, h := range sp.Status.History {
		add(h.Revision)
	}
	return out, nil
}

// Override is a what-if: run policy Name at another revision (Digest, a
// sha256 or a unique prefix of one the policy's revisions name, or a
// module in the policy namespace's chunks) or another module (File),
// and/or with other Settings.
type Override struct {
	Name     string
	Digest   string
	File     string
	Settings json.RawMessage
}

// The kinds of override ParseOverride reads, as the CLI's flags name them.
const (
	OverrideRevision = "revision" // NAME=DIGEST
	OverridePolicy   = "policy"   // NAME=FILE.wasm
	OverrideSettings = "settings" // NAME=JSON
)

// ParseOverride reads NAME=VALUE for an override of kind.
func ParseOverride(s, kind string) (Override, error) {
	name, v, ok := strings.Cut(s, "=")
	if !ok || name == "" || v == "" {
		want := map[string]string{OverrideRevision: "DIGEST", OverridePolicy: "FILE.wasm", OverrideSettings: "JSON"}[kind]
		return Override{}, fmt.Errorf("--%s %q is not NAME=%s", kind, s, want)
	}
	switch kind {
	case OverridePolicy:
		return Override{Name: name, File: v}, nil
	case OverrideSettings:
		var b bytes.Buffer
		if err := json.Compact(&b, []byte(v)); err != nil {
			return Override{}, fmt.Errorf("--settings for %s: not valid JSON: %v", name, err)
		}
		return Override{Name: name, Settings: b.Bytes()}, nil
	}
	return Override{Name: name, Digest: strings.TrimPrefix(v, "sha256:")}, nil
}

// Apply returns the profile with o applied: the policy's revision replaced
// by the named one (its settings and limits when the policy's history
// knows it, else the serving revision's with the module replaced), or its
// module by the file's.
func (c *Client) Apply(ctx context.Context, prof *Profile, o Override) (*Profile, error) {
	out := *prof
	out.Policies = append([]Policy(nil), prof.Policies...)
	k := -1
	for i := range out.Policies {
		if out.Policies[i].Name == o.Name {
			k = i
		}
	}
	if k < 0 {
		return nil, fmt.Errorf("what-if: policy %q does not serve profile %s (it has %s)", o.Name, prof.Name, names(prof.Policies))
	}
	p := &out.Policies[k]
	if o.Settings != nil {
		defer func() {
			p.Revision.Settings, p.Revision.Key = o.Settings, ""
			p.WhatIf = strings.TrimPrefix(p.WhatIf+", settings "+string(o.Settings), ", ")
		}()
	}
	switch {
	case o.Settings != nil && o.File == "" && o.Digest == "":
		return &out, nil
	case o.File != "":
		wasm, err := os.ReadFile(o.File)
		if err != nil {
			return nil, fmt.Errorf("what-if for %s: %w", o.Name, err)
		}
		rev := p.Revision
		rev.Module = api.Module{SHA256: source.Digest(wasm)}
		rev.Key = ""
		p.Revision, p.wasm, p.WhatIf = rev, wasm, "file "+o.File
		return &out, nil
	}
	revs, err := c.Revisions(ctx, prof, o.Name)
	if err != nil {
		return nil, err
	}
	var match []api.Revision
	for _, r := range revs {
		if strings.HasPrefix(r.Module.SHA256, o.Digest) {
			match = append(match, r)
		}
	}
	switch {
	case len(match) == 1:
		p.Revision = match[0]
	case len(match) > 1:
		return nil, fmt.Errorf("what-if: digest %q names %d revisions of %s: give more of it", o.Digest, len(match), o.Name)
	case api.ValidSHA256(o.Digest):
		rev := p.Revision
		rev.Module = api.Module{SHA256: o.Digest}
		rev.Key = ""
		p.Revision = rev
	default:
		return nil, fmt.Errorf("what-if: no revision of %s has digest %q (give the full sha256 of a module pushed to %s)", o.Name, o.Digest, c.Namespace)
	}
	p.wasm, p.WhatIf = nil, "revision "+api.ShortDigest(p.Revision.Module.SHA256)
	return &out, nil
}

func names(ps []Policy) string {
	var n []string
	for _, p := range ps {
		n = append(n, p.Name)
	}
	if len(n) == 0 {
		return "none"
	}
	return strings.Join(n, ", ")
}

// Fetch reads a SchedulingPolicy revision's module from where it says it
// is, as the scheduler does, checked against its digest: a URL, a file,
// an OCI artifact (this machine's module cache first, then the registry
// with the user's own credentials, ~/.docker/config.json), or the
// content-addressed chunks of c.Namespace. `wasmsched explain` and `wasmsched
// diff` share it.
func (c *Client) Fetch(ctx context.Context, rev api.Revision) ([]byte, error) {
	var v source.Version
	var err error
	switch m := rev.Module; {
	case m.OCI != "":
		// As the scheduler: a module cache first (this machine's), then
		// the registry, with the user's registry credentials.
		for _, cache := range localModuleCaches() {
			if v, err := cache.Get(m.SHA256); err == nil {
				return v.Module, nil
			}
		}
		v, err = source.FetchOCI(ctx, m.OCI, m.SHA256, source.OCIOptions{Keychain: authn.DefaultKeychain})
	case m.URL != "":
		v, err = source.FetchURL(ctx, m.URL, m.SHA256)
	case m.File != "":
		v, err = source.ReadFile(m.File, m.SHA256)
	default:
		v, err = source.FetchModule(ctx, c.Kube, c.Namespace, m.SHA256)
		if apierrors.IsForbidden(err) {
			return nil, Rights(err, "get", "configmaps", c.Namespace)
		}
	}
	return v.Module, err
}

// EngineConfig is the sandbox a revision's limits ask for: the scheduler's
// own call timeout and memory limit, defaults where the revision sets none.
func EngineConfig(rev api.Revision) engine.Config {
	cfg := engine.Config{}
	if rev.Timeout != nil {
		cfg.CallTimeout = rev.Timeout.Duration
	}
	if rev.MemoryLimit != nil {
		cfg.MemoryLimit = uint64(max(rev.MemoryLimit.Value(), 0))
	}
	return cfg
}

// fetchPolicy reads the module of p's revision: a static policy's where
// the scheduler finds it (fetchStatic), a SchedulingPolicy's from where
// its revision says it is (Fetch).
func (c *Client) fetchPolicy(ctx context.Context, p *Policy) ([]byte, error) {
	if p.isStatic {
		return c.fetchStatic(ctx, p.Name, p.static, p.Revision.Module.SHA256)
	}
	return c.Fetch(ctx, p.Revision)
}
