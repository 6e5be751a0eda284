package v1alpha1

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// RevisionOf is the revision a spec names: its module and everything the
// policy is initialised with. Weight, failure policy, mode and order are
// not part of it: they change without a reload. Context is: what a policy
// may read is checked when a version loads, so a changed allow-list is a
// new revision, loaded and checked again (and a revision that served can
// be rolled back to with the allow-list it served with).
func RevisionOf(spec *SchedulingPolicySpec) Revision {
	r := Revision{
		Module:       spec.Module,
		Settings:     compact(spec.Settings),
		Timeout:      spec.Timeout,
		MemoryLimit:  spec.MemoryLimit,
		MaxInstances: spec.MaxInstances,
		Context:      append([]string(nil), spec.Context...),
	}
	if len(r.Context) == 0 {
		r.Context = nil
	}
	if r.MemoryLimit != nil {
		q := r.MemoryLimit.DeepCopy()
		r.MemoryLimit = &q
	}
	r.Key = r.computeKey()
	return r
}

// SpecRevision is the revision sp's spec names, its tag resolved as
// status.resolved records (still a tag while no resolution matches).
func SpecRevision(sp *SchedulingPolicy) Revision {
	r := RevisionOf(&sp.Spec)
	if sp.Status.Resolved.Matches(&r.Module) {
		r = r.Resolved(sp.Status.Resolved)
	}
	return r
}

// computeKey hashes what the revision loads: equal keys load the same
// policy. Settings are compared after compaction (whitespace does not
// count), quantities by value, the context as a set (its order does not
// count). A revision without context hashes as before the field existed,
// so keys recorded in status stay valid.
func (r *Revision) computeKey() string {
	h := sha256.New()
	fmt.Fprintf(h, "sha256=%s\nurl=%s\nfile=%s\n", r.Module.SHA256, r.Module.URL, r.Module.File)
	if r.Module.OCI != "" {
		fmt.Fprintf(h, "oci=%s\n", r.Module.OCI)
	}
	if r.Module.IsTag() {
		// What a tag names is decided when it is resolved: the opt-in and
		// the resolve token are part of the unresolved revision. A resolved
		// revision hashes as the pinned reference it resolved to, so that
		// it is the same revision as a spec naming that digest.
		fmt.Fprintf(h, "allowTag=%t\nresolve=%s\n", r.Module.AllowTag, r.Module.ResolveToken)
	}
	if r.Timeout != nil {
		fmt.Fprintf(h, "timeout=%d\n", r.Timeout.Duration)
	}
	if r.MemoryLimit != nil {
		fmt.Fprintf(h, "memory=%d\n", r.MemoryLimit.Value())
	}
	if len(r.Context) > 0 {
		kinds := slices.Clone(r.Context)
		slices.Sort(kinds)
		fmt.Fprintf(h, "context=%s\n", strings.Join(slices.Compact(kinds), ","))
	}
	fmt.Fprintf(h, "instances=%d\nsettings=", r.MaxInstances)
	h.Write(compact(r.Settings))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Verify checks that r.Key is the key of what r holds: a status entry
// edited by hand must not pass for another revision.
func (r *Revision) Verify() error {
	if k := r.computeKey(); k != r.Key {
		return fmt.Errorf("revision key %q does not match its content (%s)", r.Key, k)
	}
	return nil
}

// IsTag reports whether the module names an OCI tag (not yet resolved to
// a digest) rather than a manifest digest.
func (m *Module) IsTag() bool {
	s := strings.TrimPrefix(m.OCI, "oci://")
	return s != "" && !strings.Contains(s, "@")
}

// Matches reports whether res is the resolution of the tag m names: the
// same tag and resolve token, and the module m pins, if it pins one.
func (res *TagResolution) Matches(m *Module) bool {
	return res != nil && m.IsTag() && res.Tag == m.OCI && res.ResolveToken == m.ResolveToken &&
		(m.SHA256 == "" || m.SHA256 == res.SHA256) && ValidSHA256(res.SHA256) &&
		strings.HasPrefix(res.Digest, "sha256:") && ValidSHA256(strings.TrimPrefix(res.Digest, "sha256:"))
}

// Resolved is the revision r (which names a tag) with the tag resolved as
// res says: its module pinned by manifest digest and module sha256, the
// tag kept in ResolvedFrom.
func (r Revision) Resolved(res *TagResolution) Revision {
	out := *r.DeepCopy()
	out.Module = Module{SHA256: res.SHA256, OCI: tagRepository(r.Module.OCI) + "@" + res.Digest, PullSecret: r.Module.PullSecret, ResolvedFrom: r.Module.OCI}
	out.Key = out.computeKey()
	return out
}

// tagRepository is a tag reference without its tag (oci://REGISTRY/REPO).
func tagRepository(ref string) string {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}

// Short is a revision's name in messages: the module digest's first 12
// digits (or, for a tag not yet resolved, the tag), and the key when
// settings or limits are set.
func (r *Revision) Short() string {
	d := ShortDigest(r.Module.SHA256)
	if r.Module.IsTag() && r.Module.SHA256 == "" {
		d = r.Module.OCI
	}
	if len(r.Settings) == 0 && r.Timeout == nil && r.MemoryLimit == nil && r.MaxInstances == 0 && len(r.Context) == 0 {
		return d
	}
	return d + " (revision " + r.Key + ")"
}

// ShortDigest is a digest's first 12 digits.
func ShortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	if d == "" {
		return "(none)"
	}
	return d
}

func compact(b json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 || string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return b
	}
	return out.Bytes()
}

// ModulePrefix starts the names of content-addressed chunk ConfigMaps.
const ModulePrefix = "wasm-"

// ModuleName is the policy name (in host/source's ConfigMap format) under
// which a module's chunks are stored: "wasm-" and the first 40 digits of
// its sha256, so that chunk i is the ConfigMap wasm-<40 digits>-<i>. The
// full digest is in every chunk's annotations and is verified on
// assembly; 40 digits keep the name a valid label value.
func ModuleName(sha256 string) string {
	if len(sha256) > 40 {
		sha256 = sha256[:40]
	}
	return ModulePrefix + sha256
}

// IsModuleName reports whether name is a ModuleName.
func IsModuleName(name string) bool {
	d, ok := strings.CutPrefix(name, ModulePrefix)
	return ok && len(d) == 40 && isHex(d)
}

func isHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ValidSHA256 reports whether s is 64 lower-case hex digits.
func ValidSHA256(s string) bool { return len(s) == 64 && isHex(s) }

// FromUnstructured converts a dynamic client's object.
func FromUnstructured(u *unstructured.Unstructured) (*SchedulingPolicy, error) {
	sp := &SchedulingPolicy{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, sp); err != nil {
		return nil, fmt.Errorf("SchedulingPolicy %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return sp, nil
}

// ToUnstructured converts for the dynamic client.
func ToUnstructured(sp *SchedulingPolicy) (*unstructured.Unstructured, error) {
	sp = sp.DeepCopy()
	sp.APIVersion, sp.Kind = GroupVersion.String(), Kind
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sp)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
