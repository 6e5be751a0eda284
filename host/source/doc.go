// Package source is where policy modules come from: a file, a set of
// ConfigMaps or a pinned URL. Each [Source] delivers verified module
// versions, the current one first and then each change, to the plugin that
// loads them.
//
// The package owns the ConfigMap format below ([Pack] writes it, [Assemble]
// reads it) and the watching. It must never compile, run or interpret a
// module: it hands over bytes whose digest it has checked, nothing more.
//
// # ConfigMap format
//
// A module (at most [MaxModuleSize] bytes) is compressed with gzip as one
// stream, and the stream is cut into chunks of at most [ChunkSize] bytes.
// Chunk i (0-based) of policy P is the ConfigMap named P-i in the
// scheduler's namespace, holding the chunk in binaryData["module.wasm.gz"]
// ([DataKey]). The names are fixed, so re-applying the manifests of an
// earlier version is a rollback. Every chunk carries:
//
//	labels:
//	  wasmsched.io/policy: P                  (LabelPolicy)
//	  app.kubernetes.io/managed-by: wasmsched (LabelManagedBy)
//	annotations:
//	  wasmsched.io/sha256: <hex sha256 of the uncompressed module>
//	  wasmsched.io/chunk: <i>
//	  wasmsched.io/chunks: <N>
//	  wasmsched.io/encoding: gzip
//	  wasmsched.io/size: <uncompressed bytes>
//	  wasmsched.io/chunk-sha256: <hex sha256 of this chunk's payload>
//
// Chunk 0 may also carry wasmsched.io/signature (AnnotationSignature):
// the module's cosign blob signatures, base64, separated by commas
// (signature.go). They are handed over unchecked; host/trust checks them.
//
// The per-chunk digest is not needed to verify the module (its sha256
// does that) but names the ConfigMap that is damaged when one is.
//
// [Assemble] reads a set of ConfigMaps by these rules:
//
//   - Only ConfigMaps labelled wasmsched.io/policy=P and named P-i (i a
//     decimal number without leading zeros) are considered; others are
//     ignored.
//   - Chunk 0 is the reference: its annotations must be well formed, and
//     the module is the one whose sha256 it names.
//   - The set is the chunks whose wasmsched.io/sha256 equals chunk 0's.
//     It is complete when they cover 0..N-1; chunks of other modules (a
//     leftover P-2 of an older, bigger version) and indices >= N are
//     ignored. A chunk i < N that is absent or belongs to another module is
//     reported as "missing chunk i of N".
//   - Every chunk of the set must agree with chunk 0 on chunks, encoding
//     and size, carry its own index in wasmsched.io/chunk, and hold a
//     payload of at most ChunkSize bytes matching its chunk-sha256.
//   - The concatenated payload must be exactly one gzip stream that
//     decompresses to exactly size bytes (reading stops at size+1, so a
//     zip bomb costs at most size bytes) whose sha256 is the declared one.
//
// Every failure is a [*ChunkError] naming the ConfigMap concerned: the
// damaged chunk, or chunk 0 when the module as a whole is wrong or a chunk
// is absent.
//
// Each ConfigMap's data is at most 900 KiB, under the API server's 1 MiB
// limit on a ConfigMap's data. In JSON or YAML the payload is base64, about
// 1.2 MB, which the API server accepts (its request limit is 3 MiB), but it
// is too big for the kubectl.kubernetes.io/last-applied-configuration
// annotation (256 KiB): apply the manifests with server-side apply
// (kubectl apply --server-side), kubectl create or kubectl replace, or use
// wasmsched push.
package source
