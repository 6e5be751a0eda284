// Package v1alpha1 is the SchedulingPolicy API (group wasmsched.io, version
// v1alpha1): the Go types of the custom resource through which operators
// declare the policies a scheduler runs, its CustomResourceDefinition
// (schedulingpolicy.crd.yaml, embedded: [CRD], [Install]) and the helpers
// both sides use on it: the revision a spec names ([RevisionOf], whose Key
// identifies what a scheduler loads), the content-addressed names of module
// chunks ([ModuleName]) and conversions from and to the dynamic client's
// objects.
//
// The scheduler (host/plugin) reads specs and writes status; the wasmsched
// command writes specs and chunks. Validation lives in the CRD (OpenAPI
// schema and CEL rules, no webhook) so that a bad object is refused by the
// API server; [Validate] repeats the rules the scheduler must not trust
// the API server for (ceilings set by the operator, a Shadow's target).
//
// The package must never talk to the API server except through [Install].
//
// +k8s:deepcopy-gen=package
// +groupName=wasmsched.io
package v1alpha1
