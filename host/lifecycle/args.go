package lifecycle

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/clusterctx"
	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/source"
)

// Args are the WasmPolicy plugin's arguments in a KubeSchedulerConfiguration:
//
//	pluginConfig:
//	- name: WasmPolicy
//	  args:
//	    policies:
//	    - name: gpu
//	      source: {file: /etc/wasmsched/gpu.wasm}
//	      weight: 2
//	      failurePolicy: Fail
//	      timeout: 200ms
//	      memoryLimit: 256Mi
//	      settings: {strategy: binpack}
//	      context: ["v1/namespaces"]
//
// Its deep-copy functions are generated (zz_generated.deepcopy.go, by `make
// generate`), so that a field added here is never lost by a copy.
//
// +k8s:deepcopy-gen=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type Args struct {
	metav1.TypeMeta `json:",inline"`
	// Namespace holds the policies' ConfigMaps and the status ConfigMap
	// (default: $POD_NAMESPACE, else wasmsched-system).
	Namespace string `json:"namespace,omitempty"`
	// Policies run in order: Filter stops at the first rejection. Set
	// either Policies (the policies are declared here, and changing them
	// means restarting the scheduler) or SchedulingPolicies.
	Policies []PolicyArgs `json:"policies,omitempty"`
	// SchedulingPolicies selects SchedulingPolicy resources
	// (wasmsched.io/v1alpha1) in Namespace: adding, changing or removing
	// one is a kubectl apply, never a restart (catalog.go).
	SchedulingPolicies *PolicySelection `json:"schedulingPolicies,omitempty"`
	// RegistryCA is a PEM file of CA certificates trusted, besides the
	// system roots, by the registries modules are pulled from (oci://;
	// docs/policy-oci.md).
	RegistryCA string `json:"registryCA,omitempty"`
	// Trust is the trust policy: the public keys whose signatures let a
	// module load, checked before it compiles (docs/security.md). Unset:
	// signatures are not checked.
	Trust *TrustArgs `json:"trust,omitempty"`
	// Ceilings bound the limits a SchedulingPolicy may ask for; a
	// resource over them is refused (its Rejected condition says why).
	Ceilings *Ceilings `json:"ceilings,omitempty"`
	// Probation is how long a policy's new revision (a SchedulingPolicy's,
	// or a static policy's new module) serves before it becomes the last
	// good one (default 2m). A revision that was on probation when its
	// replica died is quarantined at the next start, and the last good one
	// serves instead.
	Probation *metav1.Duration `json:"probation,omitempty"`
	// StatusLease is the scheduler's leader-election lease,
	// "namespace/name": the replica holding it writes the resources'
	// status (every replica writes its own entry). Empty: every replica
	// writes, as when there is one.
	StatusLease string `json:"statusLease,omitempty"`
}

// TrustArgs are the cluster-wide trust policy:
//
//	trust:
//	  mode: Required
//	  keys:
//	  - name: release-2026
//	    configMap: wasmsched-keys
//	    key: release-2026.pub
//	  - name: release-2027
//	    secret: wasmsched-keys-2027
//
// A module loads only when one of its signatures (cosign's format:
// docs/policy-oci.md) verifies with one of Keys; during a key rotation two
// keys are listed at once (docs/operating.md). A policy may narrow this
// (PolicyArgs.TrustedKeys, a SchedulingPolicy's spec.trustedKeys), never
// widen it.
//
// +k8s:deepcopy-gen=true
type TrustArgs struct {
	// Mode is Required (default: an unsigned module is refused) or
	// Optional (an unsigned module loads, with a warning; a signature
	// that is there must still verify).
	Mode TrustMode `json:"mode,omitempty"`
	// Keys are the trusted public keys (at most 8).
	Keys []TrustKey `json:"keys"`
}

// TrustKey is a PEM public key (ECDSA P-256 or Ed25519, as cosign.pub)
// kept in a ConfigMap or a Secret in Args.Namespace. It is read at each
// check: replacing it takes effect at the next load, and a scheduler
// restart loads nothing the key no longer verifies.
//
// +k8s:deepcopy-gen=true
type TrustKey struct {
	// Name names the key in messages and in TrustedKeys.
	Name string `json:"name"`
	// ConfigMap or Secret holding it (exactly one).
	ConfigMap string `json:"configMap,omitempty"`
	Secret    string `json:"secret,omitempty"`
	// Key is the data key holding the PEM (default cosign.pub).
	Key string `json:"key,omitempty"`
}

// TrustMode is Required or Optional.
type TrustMode string

const (
	TrustRequired TrustMode = "Required"
	TrustOptional TrustMode = "Optional"
)

// maxTrustKeys bounds the trust policy's keys (each is a Get per load).
const maxTrustKeys = 8

// PolicySelection picks SchedulingPolicies: by name, in the order given,
// or by label, ordered by spec.order then name. A named policy is
// required: while it does not exist or has no version that loads, pods
// are refused (or, with failurePolicy Ignore, the policy is skipped). A
// policy the selector stops matching, or that is deleted, stops applying.
//
// +k8s:deepcopy-gen=true
type PolicySelection struct {
	Names    []string              `json:"names,omitempty"`
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// Ceilings bound SchedulingPolicies' limits. Unset: the absolute bounds
// (a timeout of 1m, 4Gi of memory, 256 instances).
//
// +k8s:deepcopy-gen=true
type Ceilings struct {
	Timeout      *metav1.Duration   `json:"timeout,omitempty"`
	MemoryLimit  *resource.Quantity `json:"memoryLimit,omitempty"`
	MaxInstances int                `json:"maxInstances,omitempty"`
}

// PolicyArgs configure one policy.
//
// +k8s:deepcopy-gen=true
type PolicyArgs struct {
	// Name identifies the policy in events, logs and metrics.
	Name string `json:"name"`
	// Source says where the module comes from.
	Source Source `json:"source"`
	// Weight multiplies the policy's normalised score (default 1).
	Weight int64 `json:"weight,omitempty"`
	// FailurePolicy says what a failing policy (trap, timeout, invalid
	// answer) does to the pod: Fail (default) rejects it with the error as
	// the reason; Ignore skips the policy for that cycle.
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`
	// Timeout bounds each call into the policy (default 200ms).
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// MemoryLimit caps each instance's memory (default 256Mi, at least 8Mi).
	MemoryLimit *resource.Quantity `json:"memoryLimit,omitempty"`
	// MaxInstances bounds the instance pool (default twice GOMAXPROCS).
	MaxInstances int `json:"maxInstances,omitempty"`
	// Settings are passed to the policy as JSON, verbatim.
	Settings json.RawMessage `json:"settings,omitempty"`
	// Context lists the kinds of cluster object the policy may read, as
	// "group/version/resource" ("v1/namespaces" for the core group,
	// "scheduling.x-k8s.io/v1alpha1/elasticquotas"). A version that
	// declares a kind not listed is refused when it loads; Secrets are
	// never readable. The scheduler needs RBAC to list and watch each kind
	// (manifests/rbac.yaml).
	Context []string `json:"context,omitempty"`
	// Mode is Enforce (default) or Shadow: a shadow policy runs beside the
	// enforcing policy named by Shadows, never affects placement, and the
	// answers where the two disagree (Filter verdicts, the best scored
	// node, Permit's verdict class) are counted and logged.
	Mode    Mode   `json:"mode,omitempty"`
	Shadows string `json:"shadows,omitempty"`
	// OnDelete says what happens when the policy's source disappears (its
	// ConfigMaps deleted): Keep (default) keeps the last good version and
	// warns; Deactivate stops applying the policy.
	OnDelete OnDelete `json:"onDelete,omitempty"`
	// TrustedKeys narrows the trust policy for this policy: its module
	// must be signed by one of these keys (names of Trust.Keys).
	TrustedKeys []string `json:"trustedKeys,omitempty"`
}

// Source locates a module. Exactly one of File, ConfigMap, URL and OCI is
// set.
//
// +k8s:deepcopy-gen=true
type Source struct {
	// File is a path on the scheduler's file system, watched for changes.
	File string `json:"file,omitempty"`
	// ConfigMap is the policy name of ConfigMaps written by `wasmsched
	// pack`/`push` in Args.Namespace, watched through the API.
	ConfigMap string `json:"configMap,omitempty"`
	// URL is an https:// address (http:// only to localhost, 127.0.0.1 or
	// ::1), fetched once and pinned by SHA256, the module's sha256 as 64 hex
	// digits. host/source's CheckURL holds the rules.
	URL string `json:"url,omitempty"`
	// OCI is a policy artifact pinned by manifest digest,
	// oci://REGISTRY/REPO@sha256:<64 hex>, pulled once over HTTPS and
	// checked against SHA256 (docs/policy-oci.md); or, with AllowTag, a
	// tag, oci://REGISTRY/REPO:TAG.
	OCI    string `json:"oci,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// AllowTag is the explicit opt-in to a tag in OCI: it is resolved to a
	// manifest digest once, recorded in the policy's state
	// (wasmsched-policy-state) and that digest is pulled from then on,
	// across restarts, whatever the tag names later. SHA256 may then be
	// left out; when set, the tag must name that module.
	AllowTag bool `json:"allowTag,omitempty"`
	// ResolveToken: a change to it (a restart with new arguments) resolves
	// the tag again. Only with a tag.
	ResolveToken string `json:"resolveToken,omitempty"`
	// PullSecret is, with OCI, a kubernetes.io/dockerconfigjson Secret in
	// Args.Namespace with the registry's credentials, read at each pull
	// (the scheduler needs get on exactly that Secret); empty: anonymous.
	PullSecret string `json:"pullSecret,omitempty"`
}

// Mode is Enforce or Shadow.
type Mode string

const (
	ModeEnforce Mode = "Enforce"
	ModeShadow  Mode = "Shadow"
)

// OnDelete is Keep or Deactivate.
type OnDelete string

const (
	OnDeleteKeep       OnDelete = "Keep"
	OnDeleteDeactivate OnDelete = "Deactivate"
)

// FailurePolicy is Fail or Ignore.
type FailurePolicy string

const (
	FailurePolicyFail   FailurePolicy = "Fail"
	FailurePolicyIgnore FailurePolicy = "Ignore"
)

const (
	defaultNamespace = "wasmsched-system"
	defaultWeight    = 1
	maxWeight        = 100
	defaultTimeout   = engine.DefaultCallTimeout
	defaultProbation = 2 * time.Minute
	maxTimeout       = time.Minute
	maxMemoryLimit   = 4 << 30
	maxInstances     = 256
	// maxContextKinds bounds a policy's allow-list, as the
	// SchedulingPolicy CRD does: each kind is an informer.
	maxContextKinds = 32
)

// SetDefaults fills in unset fields.
func SetDefaults(a *Args) {
	if a.Namespace == "" {
		a.Namespace = os.Getenv("POD_NAMESPACE")
	}
	if a.Namespace == "" {
		a.Namespace = defaultNamespace
	}
	if a.Probation == nil {
		a.Probation = &metav1.Duration{Duration: defaultProbation}
	}
	if a.Trust != nil {
		if a.Trust.Mode == "" {
			a.Trust.Mode = TrustRequired
		}
		for i := range a.Trust.Keys {
			if a.Trust.Keys[i].Key == "" {
				a.Trust.Keys[i].Key = "cosign.pub"
			}
		}
	}
	if a.SchedulingPolicies != nil {
		if a.Ceilings == nil {
			a.Ceilings = &Ceilings{}
		}
		c := a.Ceilings
		if c.Timeout == nil {
			c.Timeout = &metav1.Duration{Duration: maxTimeout}
		}
		if c.MemoryLimit == nil {
			c.MemoryLimit = resource.NewQuantity(maxMemoryLimit, resource.BinarySI)
		}
		if c.MaxInstances == 0 {
			c.MaxInstances = maxInstances
		}
	}
	for i := range a.Policies {
		p := &a.Policies[i]
		if p.Weight == 0 {
			p.Weight = defaultWeight
		}
		if p.FailurePolicy == "" {
			p.FailurePolicy = FailurePolicyFail
		}
		if p.Timeout == nil {
			p.Timeout = &metav1.Duration{Duration: defaultTimeout}
		}
		if p.MemoryLimit == nil {
			q := resource.NewQuantity(engine.DefaultMemoryLimit, resource.BinarySI)
			p.MemoryLimit = q
		}
		if p.Mode == "" {
			p.Mode = ModeEnforce
		}
		if p.OnDelete == "" {
			p.OnDelete = OnDeleteKeep
		}
	}
}

// Validate checks defaulted arguments; errors name the offending field.
func Validate(a *Args) field.ErrorList {
	var errs field.ErrorList
	root := field.NewPath("policies")
	switch {
	case len(a.Policies) == 0 && a.SchedulingPolicies == nil:
		errs = append(errs, field.Required(root, "at least one policy is needed (or schedulingPolicies)"))
	case len(a.Policies) > 0 && a.SchedulingPolicies != nil:
		errs = append(errs, field.Invalid(field.NewPath("schedulingPolicies"), "", "set either policies or schedulingPolicies, not both"))
	case a.SchedulingPolicies != nil:
		errs = append(errs, validateSelection(a)...)
	}
	if a.Probation != nil {
		if d := a.Probation.Duration; d < time.Second || d > time.Hour {
			errs = append(errs, field.Invalid(field.NewPath("probation"), d.String(), "must be between 1s and 1h"))
		}
	}
	if a.StatusLease != "" {
		if ns, name, ok := strings.Cut(a.StatusLease, "/"); !ok || ns == "" || name == "" {
			errs = append(errs, field.Invalid(field.NewPath("statusLease"), a.StatusLease, "must be namespace/name"))
		}
	}
	errs = append(errs, validateTrust(a)...)
	seen := map[string]bool{}
	for i, p := range a.Policies {
		path := root.Index(i)
		errs = append(errs, validateTrustedKeys(a, path.Child("trustedKeys"), p.TrustedKeys)...)
		switch {
		case p.Name == "":
			errs = append(errs, field.Required(path.Child("name"), ""))
		case seen[p.Name]:
			errs = append(errs, field.Duplicate(path.Child("name"), p.Name))
		}
		seen[p.Name] = true
		switch n := countSet(p.Source.File, p.Source.ConfigMap, p.Source.URL, p.Source.OCI); {
		case n == 0:
			errs = append(errs, field.Required(path.Child("source"), "one of file, configMap, url or oci is needed"))
		case n > 1:
			errs = append(errs, field.Invalid(path.Child("source"), p.Source, "only one of file, configMap, url and oci may be set"))
		}
		if p.Source.ConfigMap != "" {
			if err := source.ValidateName(p.Source.ConfigMap); err != nil {
				errs = append(errs, field.Invalid(path.Child("source", "configMap"), p.Source.ConfigMap, err.Error()))
			}
		}
		if p.Source.URL != "" {
			// The URL source's own rules (host/source), so that what
			// passes here is what the source will fetch.
			for _, pr := range source.CheckURL(p.Source.URL, p.Source.SHA256) {
				f, detail := path.Child("source", pr.Field), fmt.Sprintf("policy %q: %s", p.Name, pr.Reason)
				if pr.Field == "sha256" && p.Source.SHA256 == "" {
					errs = append(errs, field.Required(f, detail))
				} else {
					errs = append(errs, field.Invalid(f, pr.Value, detail))
				}
			}
		} else if p.Source.OCI != "" && p.Source.AllowTag && source.IsOCITag(p.Source.OCI) {
			if _, err := source.ParseOCITagReference(p.Source.OCI); err != nil {
				errs = append(errs, field.Invalid(path.Child("source", "oci"), p.Source.OCI, fmt.Sprintf("policy %q: %v", p.Name, err)))
			}
			if p.Source.SHA256 != "" && !api.ValidSHA256(strings.ToLower(p.Source.SHA256)) {
				errs = append(errs, field.Invalid(path.Child("source", "sha256"), p.Source.SHA256, fmt.Sprintf("policy %q: the module's sha256 must be 64 hex digits (or left out with a tag)", p.Name)))
			}
		} else if p.Source.OCI != "" {
			if _, err := source.ParseOCIReference(p.Source.OCI); err != nil {
				errs = append(errs, field.Invalid(path.Child("source", "oci"), p.Source.OCI, fmt.Sprintf("policy %q: %v", p.Name, err)))
			}
			if !api.ValidSHA256(strings.ToLower(p.Source.SHA256)) {
				errs = append(errs, field.Invalid(path.Child("source", "sha256"), p.Source.SHA256, fmt.Sprintf("policy %q: the module's sha256 (64 hex digits) is needed with oci", p.Name)))
			}
		} else if p.Source.SHA256 != "" {
			errs = append(errs, field.Invalid(path.Child("source", "sha256"), p.Source.SHA256, "only meaningful with url or oci"))
		}
		if p.Source.AllowTag && p.Source.OCI == "" {
			errs = append(errs, field.Invalid(path.Child("source", "allowTag"), true, fmt.Sprintf("policy %q: only meaningful with oci", p.Name)))
		}
		if p.Source.ResolveToken != "" && !(p.Source.AllowTag && source.IsOCITag(p.Source.OCI)) {
			errs = append(errs, field.Invalid(path.Child("source", "resolveToken"), p.Source.ResolveToken, fmt.Sprintf("policy %q: only meaningful with an oci tag and allowTag", p.Name)))
		}
		if p.Source.PullSecret != "" {
			if p.Source.OCI == "" {
				errs = append(errs, field.Invalid(path.Child("source", "pullSecret"), p.Source.PullSecret, "only meaningful with oci"))
			} else if msgs := validation.IsDNS1123Subdomain(p.Source.PullSecret); len(msgs) > 0 {
				errs = append(errs, field.Invalid(path.Child("source", "pullSecret"), p.Source.PullSecret, strings.Join(msgs, "; ")))
			}
		}
		switch p.Mode {
		case ModeEnforce:
			if p.Shadows != "" {
				errs = append(errs, field.Invalid(path.Child("shadows"), p.Shadows, "only a Shadow policy shadows another"))
			}
		case ModeShadow:
			if p.Shadows == "" {
				errs = append(errs, field.Required(path.Child("shadows"), "a Shadow policy names the enforcing policy it runs beside"))
			}
		default:
			errs = append(errs, field.NotSupported(path.Child("mode"), p.Mode, []Mode{ModeEnforce, ModeShadow}))
		}
		if p.OnDelete != OnDeleteKeep && p.OnDelete != OnDeleteDeactivate {
			errs = append(errs, field.NotSupported(path.Child("onDelete"), p.OnDelete, []OnDelete{OnDeleteKeep, OnDeleteDeactivate}))
		}
		if p.Weight < 1 || p.Weight > maxWeight {
			errs = append(errs, field.Invalid(path.Child("weight"), p.Weight, fmt.Sprintf("must be in 1..%d", maxWeight)))
		}
		if p.FailurePolicy != FailurePolicyFail && p.FailurePolicy != FailurePolicyIgnore {
			errs = append(errs, field.NotSupported(path.Child("failurePolicy"), p.FailurePolicy, []FailurePolicy{FailurePolicyFail, FailurePolicyIgnore}))
		}
		if p.Timeout != nil && (p.Timeout.Duration < time.Millisecond || p.Timeout.Duration > time.Minute) {
			errs = append(errs, field.Invalid(path.Child("timeout"), p.Timeout.Duration.String(), "must be between 1ms and 1m"))
		}
		if p.MemoryLimit != nil {
			if v := p.MemoryLimit.Value(); v < engine.MinMemoryLimit || v > 4<<30 {
				errs = append(errs, field.Invalid(path.Child("memoryLimit"), p.MemoryLimit.String(), "must be between 8Mi and 4Gi"))
			}
		}
		if p.MaxInstances < 0 || p.MaxInstances > 256 {
			errs = append(errs, field.Invalid(path.Child("maxInstances"), p.MaxInstances, "must be in 0..256 (0: twice GOMAXPROCS)"))
		}
		if len(p.Settings) > 0 && !json.Valid(p.Settings) {
			errs = append(errs, field.Invalid(path.Child("settings"), string(p.Settings), "must be valid JSON"))
		}
		errs = append(errs, validateContext(path.Child("context"), p.Context)...)
	}
	for i, p := range a.Policies {
		if p.Mode != ModeShadow || p.Shadows == "" {
			continue
		}
		ok := false
		for _, q := range a.Policies {
			ok = ok || (q.Name == p.Shadows && q.Mode == ModeEnforce)
		}
		if !ok {
			errs = append(errs, field.Invalid(root.Index(i).Child("shadows"), p.Shadows, "must name an enforcing policy of this list"))
		}
	}
	return errs
}

// validateContext checks an allow-list: kinds as clusterctx.ParseKind
// reads them, no Secrets, none twice.
func validateContext(path *field.Path, kinds []string) field.ErrorList {
	var errs field.ErrorList
	seen := map[clusterctx.Kind]bool{}
	for i, s := range kinds {
		k, err := clusterctx.ParseKind(s)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path.Index(i), s, err.Error()))
		case clusterctx.Forbidden(k) != nil:
			errs = append(errs, field.Forbidden(path.Index(i), clusterctx.Forbidden(k).Error()))
		case seen[k]:
			errs = append(errs, field.Duplicate(path.Index(i), s))
		}
		seen[k] = true
	}
	if len(kinds) > maxContextKinds {
		errs = append(errs, field.TooMany(path, len(kinds), maxContextKinds))
	}
	return errs
}

// validateTrust checks the trust policy.
func validateTrust(a *Args) field.ErrorList {
	t := a.Trust
	if t == nil {
		return nil
	}
	var errs field.ErrorList
	path := field.NewPath("trust")
	if t.Mode != TrustRequired && t.Mode != TrustOptional {
		errs = append(errs, field.NotSupported(path.Child("mode"), t.Mode, []TrustMode{TrustRequired, TrustOptional}))
	}
	switch n := len(t.Keys); {
	case n == 0:
		errs = append(errs, field.Required(path.Child("keys"), "a trust policy lists at least one key"))
	case n > maxTrustKeys:
		errs = append(errs, field.TooMany(path.Child("keys"), n, maxTrustKeys))
	}
	seen := map[string]bool{}
	for i, k := range t.Keys {
		p := path.Child("keys").Index(i)
		switch {
		case k.Name == "":
			errs = append(errs, field.Required(p.Child("name"), ""))
		case seen[k.Name]:
			errs = append(errs, field.Duplicate(p.Child("name"), k.Name))
		}
		seen[k.Name] = true
		if countSet(k.ConfigMap, k.Secret) != 1 {
			errs = append(errs, field.Invalid(p, k.Name, "name exactly one of configMap and secret"))
		}
		for _, n := range []string{k.ConfigMap, k.Secret} {
			if msgs := validation.IsDNS1123Subdomain(n); n != "" && len(msgs) > 0 {
				errs = append(errs, field.Invalid(p, n, strings.Join(msgs, "; ")))
			}
		}
		if msgs := validation.IsConfigMapKey(k.Key); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("key"), k.Key, strings.Join(msgs, "; ")))
		}
	}
	return errs
}

// validateTrustedKeys checks that a policy narrows the trust policy with
// keys it lists.
func validateTrustedKeys(a *Args, path *field.Path, names []string) field.ErrorList {
	var errs field.ErrorList
	if len(names) > 0 && a.Trust == nil {
		return append(errs, field.Invalid(path, names, "trustedKeys needs a trust policy (the argument trust) to narrow"))
	}
	for i, n := range names {
		found := false
		for _, k := range a.Trust.Keys {
			found = found || k.Name == n
		}
		if !found {
			errs = append(errs, field.Invalid(path.Index(i), n, "not a key of trust.keys: a policy may narrow the trust policy, never widen it"))
		}
	}
	return errs
}

// validateSelection checks the SchedulingPolicies arguments.
func validateSelection(a *Args) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("schedulingPolicies")
	sel := a.SchedulingPolicies
	switch {
	case len(sel.Names) == 0 && sel.Selector == nil:
		errs = append(errs, field.Required(path, "names or selector is needed"))
	case len(sel.Names) > 0 && sel.Selector != nil:
		errs = append(errs, field.Invalid(path, "", "set either names or selector, not both"))
	case sel.Selector != nil:
		if _, err := metav1.LabelSelectorAsSelector(sel.Selector); err != nil {
			errs = append(errs, field.Invalid(path.Child("selector"), sel.Selector, err.Error()))
		}
	}
	seen := map[string]bool{}
	for i, n := range sel.Names {
		p := path.Child("names").Index(i)
		if seen[n] {
			errs = append(errs, field.Duplicate(p, n))
		}
		seen[n] = true
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 || len(n) > 63 {
			errs = append(errs, field.Invalid(p, n, "must be a SchedulingPolicy name (a DNS subdomain of at most 63 characters)"))
		}
	}
	c := a.Ceilings
	cp := field.NewPath("ceilings")
	if d := c.Timeout.Duration; d < time.Millisecond || d > maxTimeout {
		errs = append(errs, field.Invalid(cp.Child("timeout"), d.String(), "must be between 1ms and 1m"))
	}
	if v := c.MemoryLimit.Value(); v < engine.MinMemoryLimit || v > maxMemoryLimit {
		errs = append(errs, field.Invalid(cp.Child("memoryLimit"), c.MemoryLimit.String(), "must be between 8Mi and 4Gi"))
	}
	if c.MaxInstances < 1 || c.MaxInstances > maxInstances {
		errs = append(errs, field.Invalid(cp.Child("maxInstances"), c.MaxInstances, "must be in 1..256"))
	}
	return errs
}

func countSet(vals ...string) int {
	n := 0
	for _, v := range vals {
		if v != "" {
			n++
		}
	}
	return n
}

// EngineConfig turns the arguments into the sandbox configuration.
func (p *PolicyArgs) EngineConfig() engine.Config {
	return engine.Config{
		Name:        p.Name,
		CallTimeout: p.Timeout.Duration,
		MemoryLimit: uint64(p.MemoryLimit.Value()),
	}
}
