package clusterctx

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// Kind names a kind of cluster object by API group, version and resource
// (the plural, lower-case name), as the guest SDK's Kind does.
type Kind struct{ Group, Version, Resource string }

// The built-in kinds policies commonly read.
var (
	KindNamespace     = Kind{Version: "v1", Resource: "namespaces"}
	KindPriorityClass = Kind{Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses"}
	KindResourceSlice = Kind{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices"}
	KindResourceClaim = Kind{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims"}
	KindDeviceClass   = Kind{Group: "resource.k8s.io", Version: "v1", Resource: "deviceclasses"}
	// KindElasticQuota is scheduler-plugins' ElasticQuota custom resource.
	KindElasticQuota = Kind{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "elasticquotas"}
)

// String returns group/version/resource, or version/resource for the core
// group: "v1/namespaces", "scheduling.x-k8s.io/v1alpha1/elasticquotas".
func (k Kind) String() string {
	if k.Group == "" {
		return k.Version + "/" + k.Resource
	}
	return k.Group + "/" + k.Version + "/" + k.Resource
}

// GVR returns the kind as client-go names a resource.
func (k Kind) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: k.Group, Version: k.Version, Resource: k.Resource}
}

// FromABI returns the kind a guest declared in PolicyInfo.context_kinds.
func FromABI(k *abiv1.ContextKind) Kind {
	return Kind{Group: k.GetGroup(), Version: k.GetVersion(), Resource: k.GetResource()}
}

// ParseKind reads a kind as String writes it: "v1/namespaces",
// "scheduling.x-k8s.io/v1alpha1/elasticquotas". The resource must be
// lower-case (the plural name the API serves, not the Kind).
func ParseKind(s string) (Kind, error) {
	parts := strings.Split(s, "/")
	var k Kind
	switch len(parts) {
	case 2:
		k = Kind{Version: parts[0], Resource: parts[1]}
	case 3:
		k = Kind{Group: parts[0], Version: parts[1], Resource: parts[2]}
		if k.Group == "" {
			return Kind{}, fmt.Errorf("kind %q: empty group (write the core group as version/resource, e.g. v1/namespaces)", s)
		}
	default:
		return Kind{}, fmt.Errorf("kind %q: want group/version/resource, or version/resource for the core group (e.g. v1/namespaces, scheduling.x-k8s.io/v1alpha1/elasticquotas)", s)
	}
	if err := k.validate(); err != nil {
		return Kind{}, fmt.Errorf("kind %q: %w", s, err)
	}
	return k, nil
}

func (k Kind) validate() error {
	if k.Version == "" || k.Resource == "" {
		return errors.New("version and resource must not be empty")
	}
	if strings.ToLower(k.Resource) != k.Resource {
		return fmt.Errorf("resource %q is not lower-case: name the resource (the plural the API serves), not the Kind", k.Resource)
	}
	if strings.ContainsAny(k.Group+k.Version+k.Resource, " \t\n") {
		return errors.New("contains white space")
	}
	return nil
}

// ErrSecrets is the error of Forbidden for Secrets.
var ErrSecrets = errors.New("secrets are never readable by policies")

// Forbidden returns an error for the kinds no policy may read, whatever its
// configuration says: core Secrets, in any version. It returns nil for
// every other kind.
func Forbidden(k Kind) error {
	if k.Group == "" && k.Resource == "secrets" {
		return fmt.Errorf("%s: %w", k, ErrSecrets)
	}
	return nil
}
