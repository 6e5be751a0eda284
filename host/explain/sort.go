package explain

import (
	"sort"

	"github.com/wasmsched/wasmsched/host/eval"
)

// Ranked returns the indices of r.Nodes in the order a reader wants
// them: the chosen node, then the feasible nodes by total score (highest
// first), then the rest, each by name.
func (r *Result) Ranked() []int {
	idx := make([]int, len(r.Nodes))
	for i := range idx {
		idx[i] = i
	}
	rank := func(n *eval.NodeResult) int {
		switch {
		case n.Name == r.Chosen:
			return 0
		case n.Code == "Success":
			return 1
		}
		return 2
	}
	sort.SliceStable(idx, func(a, b int) bool {
		na, nb := &r.Nodes[idx[a]], &r.Nodes[idx[b]]
		if ra, rb := rank(na), rank(nb); ra != rb {
			return ra < rb
		}
		var sa, sb int64 = -1, -1
		if na.Score != nil {
			sa = *na.Score
		}
		if nb.Score != nil {
			sb = *nb.Score
		}
		if sa != sb {
			return sa > sb
		}
		return na.Name < nb.Name
	})
	return idx
}

// Page returns r with only the nodes in ranked order from offset, at most
// limit of them (all with limit 0), and the number of nodes in all.
func (r *Result) Page(offset, limit int) (*Result, int) {
	idx := r.Ranked()
	total := len(idx)
	offset = min(max(offset, 0), total)
	end := total
	if limit > 0 {
		end = min(offset+limit, total)
	}
	out := *r
	out.Nodes = make([]eval.NodeResult, 0, end-offset)
	for _, i := range idx[offset:end] {
		out.Nodes = append(out.Nodes, r.Nodes[i])
	}
	return &out, total
}
