// Package clusterctx keeps the cluster objects and the tenant usage that
// context-aware policies read, ready to sync into their instances.
//
// What it owns: the kinds a policy may name (Kind, ParseKind, and the rule
// that Secrets are never readable, Forbidden); one Store per kind, fed by an
// informer, holding each object encoded once as an ABI ContextObject with a
// change log so that an instance is sent only what changed since its last
// sync, each object once however often it changed; Usage, the resources
// requested per tenant (namespace, or value of a pod label key) by bound and
// assumed pods; and Registry, which starts the informers on demand, one per
// kind per scheduler process.
//
// What it must never do: call the API server in a scheduling cycle (every
// read here is from an informer's events, kept in memory), hand out a Secret,
// or decide which policy may read what (the bridge plugin checks its
// allow-list before it asks the Registry for a Store).
package clusterctx
