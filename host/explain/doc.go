// Package explain answers "why is this pod where it is, or Pending" for a
// live cluster: it reads the cluster as the scheduler's snapshot would hold
// it (nodes, placed pods, the cluster objects the policies declared they
// read), the serving revisions of the pod's scheduler profile (module,
// settings, limits, failure policy, weight; from its SchedulingPolicies'
// status, or what the scheduler publishes of its static policies; fetched
// and digest-checked as the scheduler fetches them) and runs the pod through host/eval, the
// composition the scheduler uses, keeping each policy's own verdict and
// raw and normalised score per node. It backs `wasmsched explain` and
// `wasmsched ui` (package host/explain/web).
//
// What it gives is a re-evaluation now, against the cluster as it is, not
// a record of the decision the scheduler made: a bound pod is judged as if
// it were unplaced, against the cluster without itself.
//
// It only reads the cluster (get and list); it never writes, and it never
// composes policies or applies failure policies itself (host/compose
// does, through host/eval).
package explain
