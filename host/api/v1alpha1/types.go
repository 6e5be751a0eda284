package v1alpha1

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SchedulingPolicy declares one WASM policy: which module, with which
// settings, how it composes with the others and what its calls may use.
// It lives in the scheduler's namespace; a scheduler profile selects the
// SchedulingPolicies it runs by name or label (the WasmPolicy plugin's
// schedulingPolicies argument).
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type SchedulingPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SchedulingPolicySpec   `json:"spec"`
	Status SchedulingPolicyStatus `json:"status,omitempty"`
}

// SchedulingPolicyList is a list of SchedulingPolicies.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type SchedulingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SchedulingPolicy `json:"items"`
}

// SchedulingPolicySpec is what the operator declares.
type SchedulingPolicySpec struct {
	// Module is the policy's module: its digest and where its bytes are.
	Module Module `json:"module"`
	// Settings are handed to the policy as JSON, verbatim; the policy
	// validates them when a version loads.
	Settings json.RawMessage `json:"settings,omitempty"`
	// Mode is Enforce (default) or Shadow: a Shadow policy runs beside the
	// enforcing policy named by Shadows and never affects placement.
	Mode    Mode   `json:"mode,omitempty"`
	Shadows string `json:"shadows,omitempty"`
	// FailurePolicy is Fail (default: a failing call rejects the pod) or
	// Ignore (the policy is skipped for that attempt).
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`
	// Weight multiplies the policy's normalised score, 1..100 (default 1).
	Weight int64 `json:"weight,omitempty"`
	// Order places the policy among those a label selector picks: lower
	// first, then by name.
	Order int32 `json:"order,omitempty"`
	// Timeout bounds each call (default 200ms), MemoryLimit each instance's
	// memory (default 256Mi), MaxInstances the instance pool (default twice
	// GOMAXPROCS); the scheduler's ceilings bound all three.
	Timeout      *metav1.Duration   `json:"timeout,omitempty"`
	MemoryLimit  *resource.Quantity `json:"memoryLimit,omitempty"`
	MaxInstances int32              `json:"maxInstances,omitempty"`
	// Context lists the kinds of cluster object the policy may read, as
	// "group/version/resource" ("v1/namespaces" for the core group,
	// "scheduling.x-k8s.io/v1alpha1/elasticquotas"). A version that
	// declares a kind not listed here is refused; Secrets are never
	// readable, listed or not. The scheduler needs RBAC to list and watch
	// each kind (manifests/rbac.yaml).
	Context []string `json:"context,omitempty"`
	// TrustedKeys narrows the cluster's trust policy for this policy: its
	// modules must be signed by one of these keys (names of the plugin
	// argument trust.keys). Empty: any key the cluster trusts. It can
	// never add a key the cluster does not trust.
	TrustedKeys []string `json:"trustedKeys,omitempty"`
}

// Module names a module by digest and says where its bytes are: in
// content-addressed chunk ConfigMaps in the policy's namespace (none of
// URL, File and OCI set; `wasmsched push` writes them), at a URL, in a file
// of the scheduler's image, or in an OCI registry. The bytes must hash to
// SHA256 wherever they are.
type Module struct {
	// SHA256 is the module's sha256, 64 lower-case hex digits. Only a tag
	// (OCI with AllowTag) may leave it out.
	SHA256 string `json:"sha256,omitempty"`
	// URL is an https:// address (http:// only to localhost).
	URL string `json:"url,omitempty"`
	// File is an absolute path on the scheduler's file system.
	File string `json:"file,omitempty"`
	// OCI is a policy artifact in an OCI registry pinned by manifest
	// digest, oci://REGISTRY/REPO@sha256:<64 hex> (`wasmsched push --oci`
	// prints it; docs/policy-oci.md), or, with AllowTag, a tag,
	// oci://REGISTRY/REPO:TAG. Pulled over HTTPS, then kept in the
	// scheduler's module cache by SHA256.
	OCI string `json:"oci,omitempty"`
	// AllowTag is the explicit opt-in to a tag in OCI. The scheduler
	// resolves the tag to a manifest digest once, when the spec first
	// names it (or its ResolveToken changes), records the digest in
	// status.resolved and pulls that digest from then on, across restarts,
	// whatever the tag names later. SHA256 may then be left out (the
	// module is the resolved manifest's layer); when set, the tag must
	// name that module.
	AllowTag bool `json:"allowTag,omitempty"`
	// ResolveToken: any change to it resolves the tag again
	// (`wasmsched resolve` sets it to the current time), as a new
	// revision. Only with a tag.
	ResolveToken string `json:"resolveToken,omitempty"`
	// ResolvedFrom is written by the scheduler, never in a spec: on a
	// revision in status whose OCI digest was resolved from a tag, the tag
	// reference the spec named.
	ResolvedFrom string `json:"resolvedFrom,omitempty"`
	// PullSecret is a kubernetes.io/dockerconfigjson Secret in the
	// policy's namespace holding the registry's credentials for OCI (the
	// scheduler needs get on exactly that Secret); empty: anonymous.
	PullSecret string `json:"pullSecret,omitempty"`
}

// Mode is Enforce or Shadow.
type Mode string

const (
	ModeEnforce Mode = "Enforce"
	ModeShadow  Mode = "Shadow"
)

// FailurePolicy is Fail or Ignore.
type FailurePolicy string

const (
	FailurePolicyFail   FailurePolicy = "Fail"
	FailurePolicyIgnore FailurePolicy = "Ignore"
)

// SchedulingPolicyStatus is what the schedulers report. The replica that
// holds the scheduler's lease (every replica, without leader election)
// writes the fields outside Replicas; each replica writes its own entry of
// Replicas.
type SchedulingPolicyStatus struct {
	// ObservedGeneration is the generation of the spec last acted on.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Serving is the revision serving now, ServingDigest its module's
	// digest shortened to 12 digits (for kubectl's columns), LoadedAt when
	// it started serving.
	Serving       *Revision    `json:"serving,omitempty"`
	ServingDigest string       `json:"servingDigest,omitempty"`
	LoadedAt      *metav1.Time `json:"loadedAt,omitempty"`
	// LastGood is the last revision that served for the probation period
	// without the scheduler dying: what a scheduler serves at start-up when
	// the spec's revision does not load.
	LastGood *Revision `json:"lastGood,omitempty"`
	// History holds the revisions that passed probation, newest first (at
	// most MaxHistory): what `wasmsched rollback` can return to.
	History []HistoryEntry `json:"history,omitempty"`
	// Quarantined are revisions that were serving when a scheduler died or
	// stopped answering within their probation; they are not loaded again
	// until the spec names another revision and back, or `wasmsched push
	// --force` clears them.
	Quarantined []Quarantine `json:"quarantined,omitempty"`
	// Resolved is the tag of spec.module.oci (with allowTag) resolved to a
	// manifest digest: what every replica pulls while the spec names that
	// tag and resolve token, whatever the tag names later.
	Resolved *TagResolution `json:"resolved,omitempty"`
	// Conditions: Ready (the spec's revision serves) and Rejected (the
	// spec's revision was refused; the message is the latest reason).
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Replicas is each scheduler replica's own view.
	Replicas []ReplicaStatus `json:"replicas,omitempty"`
}

// Revision is everything a scheduler loads for a policy: the module and
// what the policy is initialised with. Key identifies it.
type Revision struct {
	Key          string             `json:"key"`
	Module       Module             `json:"module"`
	Settings     json.RawMessage    `json:"settings,omitempty"`
	Timeout      *metav1.Duration   `json:"timeout,omitempty"`
	MemoryLimit  *resource.Quantity `json:"memoryLimit,omitempty"`
	MaxInstances int32              `json:"maxInstances,omitempty"`
	Context      []string           `json:"context,omitempty"`
}

// TagResolution is a tag resolved to a digest when a revision named it.
type TagResolution struct {
	// Tag and ResolveToken are spec.module.oci and resolveToken as they
	// were when the tag was resolved.
	Tag          string `json:"tag"`
	ResolveToken string `json:"resolveToken,omitempty"`
	// Digest is the manifest digest the tag named (sha256:<64 hex>), and
	// SHA256 the module its layer holds.
	Digest string `json:"digest"`
	SHA256 string `json:"sha256"`
	// ResolvedAt is when, and Replica which scheduler replica resolved it.
	ResolvedAt metav1.Time `json:"resolvedAt"`
	Replica    string      `json:"replica,omitempty"`
}

// HistoryEntry is a revision that passed probation, and when.
type HistoryEntry struct {
	Revision `json:",inline"`
	ProvenAt metav1.Time `json:"provenAt"`
}

// Quarantine is a revision a scheduler refuses to load again.
type Quarantine struct {
	Key     string      `json:"key"`
	SHA256  string      `json:"sha256"`
	Replica string      `json:"replica"`
	Reason  string      `json:"reason"`
	At      metav1.Time `json:"at"`
}

// Probation is a revision a replica activated and has not yet proven.
type Probation struct {
	Key   string      `json:"key"`
	Since metav1.Time `json:"since"`
}

// ReplicaStatus is one scheduler replica's (and profile's) view.
type ReplicaStatus struct {
	// Name is the replica (its pod name, or host name) and Profile the
	// scheduler profile.
	Name    string `json:"name"`
	Profile string `json:"profile,omitempty"`
	// Key and SHA256 are the revision serving on this replica (empty:
	// none).
	Key    string `json:"key,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Ready: the spec's revision serves on this replica.
	Ready bool `json:"ready"`
	// Message says why not, or what serves instead.
	Message string `json:"message,omitempty"`
	// Probation is set while a revision this replica activated is unproven.
	Probation *Probation `json:"probation,omitempty"`
	// Heartbeat is refreshed periodically; entries not refreshed for
	// ReplicaExpiry are pruned by the other replicas.
	Heartbeat metav1.Time `json:"heartbeat"`
}

// Condition types and reasons.
const (
	ConditionReady    = "Ready"
	ConditionRejected = "Rejected"

	// Ready reasons.
	ReasonServing         = "Serving"         // the spec's revision serves
	ReasonLoading         = "Loading"         // the spec's revision is loading
	ReasonServingLastGood = "ServingLastGood" // the spec's revision failed; the last good serves
	ReasonQuarantined     = "Quarantined"     // the spec's revision is quarantined; the last good serves
	ReasonNoVersion       = "NoVersion"       // nothing serves
	// Rejected reasons.
	ReasonLoadFailed = "LoadFailed" // compile, init, ABI or settings
	ReasonFetch      = "FetchFailed"
	ReasonInvalid    = "Invalid"   // refused by the scheduler's own checks
	ReasonUntrusted  = "Untrusted" // refused by the trust policy: no signature by a trusted key
	ReasonAccepted   = "Accepted"
)
