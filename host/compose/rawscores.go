package compose

// RawScores returns the policy's scores of the nodes PreScore was given,
// in their order, as the cycle holds them after Score: the guest's raw
// scores, unless normalized reports that the guest normalised them in the
// same batch (wasmsched_score_nodes), in which case the raw ones were
// never seen by the host. nil when the policy did not score in this cycle.
// For explaining a cycle after the fact (host/eval's detail); call it
// once NormalizeScore has returned, and do not modify the slice.
func (e *Entry) RawScores() (scores []int64, normalized bool) {
	return e.scores, e.normalized
}
