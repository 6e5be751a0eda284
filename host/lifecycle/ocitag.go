package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/source"
)

// OCI tags, with the explicit opt-in (docs/policy-oci.md#tags).
//
// A tag is resolved to a manifest digest once, when a revision naming it
// is created: the first time the spec names that tag with that resolve
// token (a SchedulingPolicy's spec.module.oci and resolveToken; a static
// policy's source.oci and resolveToken). The resolution is recorded in the
// policy's status (status.resolved; a static policy's state in
// wasmsched-policy-state) before anything is pulled, and from then on the
// pinned digest is what loads: a resync, a re-fetch, a fallback and a
// restart read the digest from status, never the tag. A tag moved since is
// not followed; changing the tag or the resolve token (`wasmsched
// resolve`) resolves it again, as a new revision, which is fetched,
// checked against the trust policy, loaded and proven like any other.
//
// Replicas agree on one digest: the first resolution recorded wins, and a
// replica whose write finds another resolution of the same tag and token
// adopts it. A resolution that cannot be recorded is a failed fetch
// (retried at the next resync): a digest loaded unrecorded could differ
// from the one a restart would resolve.

// EventTagResolved is the Event posted when a policy's tag is resolved.
const EventTagResolved = "PolicyTagResolved"

// resolveTag resolves the tag rev names (on a goroutine of its own, never
// on a scheduling cycle) and begins the resolved revision, unless a newer
// revision is wanted by then (gen). The caller holds c.mu.
func (e *entry) resolveTag(rev api.Revision, gen int) {
	e.slot.setMissing("")
	go func() {
		ctx, cancel := context.WithTimeout(e.ctx, 3*time.Minute)
		defer cancel()
		res, err := e.c.resolveTag(ctx, e.name, rev.Module)
		e.c.mu.Lock()
		defer e.c.mu.Unlock()
		if e.ctx.Err() != nil || gen != e.gen {
			return
		}
		if err != nil {
			e.c.logger.Error(err, "Policy tag cannot be resolved", "policy", e.name, "oci", rev.Module.OCI)
			e.refuse(rev, api.ReasonFetch, err)
			return
		}
		resolved := rev.Resolved(res)
		e.want = resolved
		delete(e.failed, resolved.Key)
		e.c.logger.Info("Policy tag resolved: its digest loads until the tag or the resolve token changes", "policy", e.name,
			"oci", rev.Module.OCI, "digest", res.Digest, "module", res.SHA256, "resolvedBy", res.Replica)
		e.c.event(e.sp, nil, v1.EventTypeNormal, EventTagResolved, fmt.Sprintf("tag %s resolved to %s (module %s), recorded in status.resolved; it loads as revision %s",
			rev.Module.OCI, res.Digest, api.ShortDigest(res.SHA256), resolved.Short()))
		e.c.status.touch(e.name)
		e.begin(resolved)
	}()
}

// resolveTag resolves the tag m names and records the resolution in the
// policy's status, or adopts the one recorded there first (by another
// replica). It fails when the resolution cannot be recorded.
func (c *catalog) resolveTag(ctx context.Context, name string, m api.Module) (*api.TagResolution, error) {
	r, err := c.store.resolve(ctx, name, m)
	if err != nil {
		return nil, err
	}
	res := &api.TagResolution{Tag: m.OCI, ResolveToken: m.ResolveToken, Digest: r.Pinned.DigestStr(), SHA256: r.SHA256,
		ResolvedAt: metav1.Now(), Replica: c.l.replica}
	return recordResolution(ctx, c.store, name, m, res)
}

// errSpecMoved: the spec no longer names the tag resolved.
var errSpecMoved = errors.New("the spec no longer names this tag and resolve token")

// recordResolution writes res into the status of the policy called name
// through st, unless a resolution of the same tag and token is there
// already: then that one is returned.
func recordResolution(ctx context.Context, st store, name string, m api.Module, res *api.TagResolution) (*api.TagResolution, error) {
	var recorded *api.TagResolution
	err := st.update(ctx, name, func(sp *api.SchedulingPolicy) {
		recorded = nil
		switch cur := sp.Status.Resolved; {
		case cur.Matches(&m):
			recorded = cur.DeepCopy()
		case !sameTag(&sp.Spec.Module, &m):
		default:
			sp.Status.Resolved = res
			recorded = res
		}
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("oci %s: the tag resolved to %s, but the resolution could not be recorded in status, so it is not loaded (a restart could resolve another digest): %w", m.OCI, res.Digest, err)
	case recorded == nil:
		return nil, fmt.Errorf("oci %s: %w", m.OCI, errSpecMoved)
	}
	return recorded, nil
}

// sameTag reports whether spec names the tag m names, with the same
// resolve token and module pin. A static policy's spec names no tag (its
// source resolves it): it is judged by the source.
func sameTag(spec, m *api.Module) bool {
	if !spec.IsTag() {
		return spec.OCI == "" && spec.URL == "" && spec.File == ""
	}
	return spec.OCI == m.OCI && spec.ResolveToken == m.ResolveToken && spec.SHA256 == m.SHA256
}

// resolve reads what the tag ref names now, with the credentials keychain
// gives.
func (f ociFetcher) resolve(ctx context.Context, ref, sha256 string, keychain func(context.Context) (authn.Keychain, error)) (source.OCIResolution, error) {
	opts := f.opts
	if keychain != nil {
		k, err := keychain(ctx)
		if err != nil {
			return source.OCIResolution{}, fmt.Errorf("oci %s: %w", ref, err)
		}
		opts.Keychain = k
	}
	return source.ResolveOCITag(ctx, ref, sha256, opts)
}
