// Package lifecycle owns the policies a scheduler profile runs and the
// version each serves: revisions in, serving versions out, status out.
//
// Revisions come from a store (store.go): SchedulingPolicy resources
// (crdStore: adding, changing or removing one is a kubectl apply), or the
// plugin's arguments (staticStore: a roster that never changes, each
// policy's module delivered by its source, a file, ConfigMaps or a pinned
// URL). Both go through one path (catalog.go, revision.go): fetch, check
// the digest, load off the scheduling path on the slot's loader
// goroutine, newest revision wins (loader.go), probation, last good
// revision, quarantine of a revision that was on probation when the
// process died, one set of Event reasons (events.go), conditions and
// metrics (metrics.go). A revision refused keeps the version serving; a
// policy with none at start-up falls back to its last good revision; a
// policy with nothing that loads holds its profile's pods with the reason
// (Roster's Blocked, or a slot without a version), and the scheduler runs.
//
// The scheduler plugin (host/plugin) reads the Roster at each cycle and
// pins the versions it finds there; Options carry what the lifecycle needs
// of the scheduler (a client, an Event recorder, the binding of a version
// to the cluster objects it reads, the requeue of pods after a swap).
//
// It must never know the scheduler framework (cycle states, statuses,
// handles), run a policy on a scheduling cycle's behalf, or block one: a
// cycle only reads atomic pointers.
package lifecycle
