// Package cmformat is the format of a policy module delivered in
// ConfigMaps: [Pack] writes it, [Assemble] reads and verifies it. It owns
// nothing else: the watching and the other sources are host/source's, which
// re-exports this package's names. It must never talk to an API server,
// compile or run a module, and it must import nothing beyond k8s.io/api
// and k8s.io/apimachinery: it is a package of its own so that its fuzz
// targets instrument only that (the 69 packages its tests link, where
// host/source links 549, client-go and the registry clients among them).
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
// Chunk 0 may also carry wasmsched.io/signature (source.AnnotationSignature):
// the module's cosign blob signatures, base64, separated by commas. This
// package neither writes nor reads them; host/source hands them over
// unchecked and host/trust checks them.
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
package cmformat
