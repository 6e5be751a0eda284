package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The API's coordinates.
const (
	Group    = "wasmsched.io"
	Version  = "v1alpha1"
	Kind     = "SchedulingPolicy"
	Resource = "schedulingpolicies"
	// CRDName is the CustomResourceDefinition's name.
	CRDName = Resource + "." + Group
)

// GroupVersion, the resource and the kind, for the dynamic client.
var (
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}
	GVR          = GroupVersion.WithResource(Resource)
	GVK          = GroupVersion.WithKind(Kind)
)

// Status and history bounds.
const (
	// MaxHistory bounds Status.History.
	MaxHistory = 10
	// MaxQuarantined bounds Status.Quarantined (oldest dropped first).
	MaxQuarantined = 10
)
