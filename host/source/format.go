package source

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmsched/wasmsched/host/source/cmformat"
)

// The ConfigMap format lives in package cmformat, a package of its own so
// that its fuzz targets compile little: fuzzing instruments every package
// of the test binary, and this package's tests link client-go and the
// registry clients. Its names are re-exported here, so that callers of the
// sources need not import both.

// The limits, keys and values of the ConfigMap format: see [cmformat].
const (
	ChunkSize     = cmformat.ChunkSize
	MaxModuleSize = cmformat.MaxModuleSize
	MaxChunks     = cmformat.MaxChunks

	DataKey   = cmformat.DataKey
	Encoding  = cmformat.Encoding
	ManagedBy = cmformat.ManagedBy

	LabelPolicy    = cmformat.LabelPolicy
	LabelManagedBy = cmformat.LabelManagedBy

	AnnotationSHA256      = cmformat.AnnotationSHA256
	AnnotationChunk       = cmformat.AnnotationChunk
	AnnotationChunks      = cmformat.AnnotationChunks
	AnnotationEncoding    = cmformat.AnnotationEncoding
	AnnotationSize        = cmformat.AnnotationSize
	AnnotationChunkSHA256 = cmformat.AnnotationChunkSHA256
)

// ErrNoChunks is [cmformat.ErrNoChunks]: no ConfigMap of the policy.
var ErrNoChunks = cmformat.ErrNoChunks

// ChunkError is [cmformat.ChunkError]: a problem with one ConfigMap of a
// policy.
type ChunkError = cmformat.ChunkError

// ChunkName is [cmformat.ChunkName]: the name of chunk i of a policy's
// ConfigMaps.
func ChunkName(policy string, i int) string { return cmformat.ChunkName(policy, i) }

// ValidateName is [cmformat.ValidateName]: it checks that a policy name can
// be delivered in ConfigMaps.
func ValidateName(policy string) error { return cmformat.ValidateName(policy) }

// Digest is [cmformat.Digest]: the hex sha256 of a module, the digest every
// source reports.
func Digest(module []byte) string { return cmformat.Digest(module) }

// Pack is [cmformat.Pack]: it splits a module into the ConfigMaps that
// deliver it as policy in namespace.
func Pack(policy, namespace string, module []byte) ([]*v1.ConfigMap, error) {
	return cmformat.Pack(policy, namespace, module)
}

// Assemble is [cmformat.Assemble]: it reassembles and verifies the module
// of policy from its ConfigMaps.
func Assemble(policy string, cms []*v1.ConfigMap) (module []byte, digest string, err error) {
	return cmformat.Assemble(policy, cms)
}

// originOf describes a set of chunks, e.g. "configmap ns/gpu-0..1".
func originOf(namespace, policy string, chunks int) string {
	if chunks <= 1 {
		return "configmap " + namespace + "/" + ChunkName(policy, 0)
	}
	return fmt.Sprintf("configmap %s/%s..%d", namespace, ChunkName(policy, 0), chunks-1)
}
