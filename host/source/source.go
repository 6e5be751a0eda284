package source

import "context"

// A Version is one verified module version.
type Version struct {
	// Module is the module's bytes. The receiver owns them: no source keeps
	// or changes them after delivery.
	Module []byte
	// Digest is the hex sha256 of Module, the same as the engine's digest.
	Digest string
	// Origin says where the version came from, for logs and events:
	// "configmap wasmsched-system/gpu-0..1", "file /etc/wasmsched/gpu.wasm",
	// "url https://example.com/gpu.wasm".
	Origin string
	// ResourceVersion is, for a version from ConfigMaps, chunk 0's
	// resource version: Events about the version name that object.
	ResourceVersion string
	// Signatures are the signatures found beside the module (none: the
	// module is unsigned): a detached .sig file, the ConfigMaps'
	// annotation, the artifact's cosign signature image. They are not
	// checked here: host/trust does, against the keys the cluster trusts.
	Signatures []Signature
	// Manifest is, for a module from an OCI registry, the artifact's
	// manifest digest ("sha256:<hex>"), which image signatures vouch for.
	Manifest string
}

// A Signature is one signature found beside a module, in cosign's format.
type Signature struct {
	// Payload is what was signed: nil for a blob signature, made over the
	// module's bytes; else a simple-signing payload naming the manifest
	// digest of the artifact holding the module.
	Payload []byte
	// Signature is the raw signature (decoded from the base64 cosign
	// writes).
	Signature []byte
	// From says where it was found, for messages.
	From string
}

// Handlers receive what a [Source] finds. A nil field ignores that kind of
// report. A source calls them on the goroutine that called Run, one at a
// time and never after Run returns; a slow handler delays the source's next
// look, it does not lose a change (changes that happen meanwhile are
// coalesced into the newest state).
type Handlers struct {
	// Version receives a new verified version: the current one first, then
	// each one whose digest differs from the last delivered.
	Version func(Version)
	// Error receives problems: an unreadable file, a missing or damaged
	// chunk ([*ChunkError]), a digest mismatch, a failed download. The
	// source keeps watching; the next version found after an error is
	// delivered even if its digest is the last delivered one (it repairs
	// the failure).
	Error func(error)
	// Deleted reports that the module is gone: no ConfigMap of the policy
	// exists (at start, or after the last one was deleted). Only the
	// ConfigMap source calls it; a file that disappears is an Error. After
	// Deleted, the next version found is delivered even if its digest is
	// the last delivered one.
	Deleted func()
}

// A Source delivers the versions of one policy's module.
type Source interface {
	// Run watches the source and reports to h until ctx is done, then
	// returns, once every goroutine it started has ended. Run may be called
	// once per Source.
	Run(ctx context.Context, h Handlers)
}

func (h Handlers) version(v Version) {
	if h.Version != nil {
		h.Version(v)
	}
}

func (h Handlers) error(err error) {
	if h.Error != nil {
		h.Error(err)
	}
}

func (h Handlers) deleted() {
	if h.Deleted != nil {
		h.Deleted()
	}
}
