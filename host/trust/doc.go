// Package trust decides whether a policy module was signed by a key the
// cluster trusts, before anything compiles it (docs/security.md, trust
// policy; docs/policy-oci.md, signature format).
//
// Signatures are cosign's, so that cosign can make and check them and we
// can check cosign's:
//
//   - a blob signature (cosign sign-blob): the signature over the module's
//     bytes themselves, base64 in a detached file beside a file or URL
//     module and in the annotation wasmsched.io/signature of every
//     ConfigMap chunk;
//   - an image signature (cosign sign), for a module in an OCI registry:
//     the signature over a simple-signing payload (SimpleSigningPayload)
//     that names the artifact's manifest digest, stored as cosign stores
//     it, in the image at the tag sha256-<hex>.sig beside the artifact.
//
// Keys are ECDSA P-256 (signatures ASN.1 over SHA-256 of the message) and
// Ed25519 (over the message), as PEM public keys (PKIX, "PUBLIC KEY"), the
// files cosign writes as cosign.pub.
//
// The package owns the formats and the check. It must never fetch
// anything: the sources hand it the signatures they found beside the
// module (source.Version.Signatures), and the lifecycle the keys it read.
package trust
