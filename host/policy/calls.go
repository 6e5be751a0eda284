package policy

import (
	"context"
	"fmt"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/engine"
)

// Status is a guest's verdict.
type Status struct {
	Code    abiv1.Code
	Reasons []string
}

// IsSuccess reports a success.
func (s Status) IsSuccess() bool { return s.Code == abiv1.Code_CODE_SUCCESS }

var success = Status{Code: abiv1.Code_CODE_SUCCESS}

// CodeName spells a code as the scheduler framework does.
func CodeName(c abiv1.Code) string {
	switch c {
	case abiv1.Code_CODE_SUCCESS:
		return "Success"
	case abiv1.Code_CODE_ERROR:
		return "Error"
	case abiv1.Code_CODE_UNSCHEDULABLE:
		return "Unschedulable"
	case abiv1.Code_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE:
		return "UnschedulableAndUnresolvable"
	case abiv1.Code_CODE_WAIT:
		return "Wait"
	case abiv1.Code_CODE_SKIP:
		return "Skip"
	case abiv1.Code_CODE_PENDING:
		return "Pending"
	}
	return fmt.Sprintf("Invalid(%d)", int32(c))
}

// status completes a non-success code with the guest's reasons.
func (p *Policy) status(m *member, call string, code abiv1.Code) (Status, error) {
	if code == abiv1.Code_CODE_SUCCESS {
		return success, nil
	}
	r, err := m.in.Result(call)
	if err != nil {
		return Status{}, err
	}
	return Status{Code: code, Reasons: r.GetReasons()}, nil
}

// PreFilterResult is the guest's PreFilter verdict.
type PreFilterResult struct {
	Status Status
	// NodeNames, when Restricted, are the only nodes to evaluate.
	Restricted bool
	NodeNames  []string
}

// PreFilter starts the cycle on an instance and returns PreFilter's verdict
// (Success when the guest has no PreFilter).
func (p *Policy) PreFilter(ctx context.Context, c *Cycle) (PreFilterResult, error) {
	var res PreFilterResult
	err := p.with(ctx, "pre_filter", func(m *member) error {
		m.cycle = 0 // always run PreFilter afresh here, and read its result
		if err := p.prepare(m, c); err != nil {
			return err
		}
		if m.noDetail || (m.cycleCode == abiv1.Code_CODE_SUCCESS && !p.Implements(abiv1.Point_POINT_PRE_FILTER)) {
			// Nothing to fetch: the guest flagged that PreFilter's
			// Result says nothing its code does not, or has no PreFilter.
			res.Status = Status{Code: m.cycleCode}
			return nil
		}
		r, err := m.in.Result("pre_filter")
		if err != nil {
			return err
		}
		res = PreFilterResult{
			Status:     Status{Code: m.cycleCode, Reasons: r.GetReasons()},
			Restricted: r.GetNodeSubset(),
			NodeNames:  r.GetNodeNames(),
		}
		return nil
	})
	return res, err
}

// Filter runs the guest's Filter on one node. The NodeInfo is the truth for
// this call even when it is not the cycle snapshot's (preemption and
// nominated pods evaluate modified copies): the instance is sent whatever
// generation differs from the one it holds.
func (p *Policy) Filter(ctx context.Context, c *Cycle, ni fwk.NodeInfo) (Status, error) {
	var s Status
	err := p.with(ctx, "filter", func(m *member) error {
		h, err := p.ready(m, c, ni)
		if err != nil {
			return err
		}
		code, seq, err := m.in.Filter(h)
		if err != nil {
			return err
		}
		if code == abiv1.Code_CODE_SUCCESS {
			s = success
			return nil
		}
		if seq != 0 && seq == m.rejectSeq && code == m.rejected.Code {
			s = m.rejected
			return nil
		}
		if s, err = p.status(m, "filter", code); err != nil {
			return err
		}
		m.rejectSeq, m.rejected = seq, s
		return nil
	})
	return s, err
}

// ready prepares the cycle on m and syncs the node, returning its handle.
func (p *Policy) ready(m *member, c *Cycle, ni fwk.NodeInfo) (int32, error) {
	if ni == nil || ni.Node() == nil {
		return 0, p.nodeNotFound()
	}
	if err := p.prepare(m, c); err != nil {
		return 0, err
	}
	h := m.handle(&p.handles, ni.Node().Name)
	return h, p.syncNode(m, h, ni)
}

// Score runs the guest's Score on one node.
func (p *Policy) Score(ctx context.Context, c *Cycle, ni fwk.NodeInfo) (int64, Status, error) {
	var (
		v int64
		s Status
	)
	err := p.with(ctx, "score", func(m *member) error {
		h, err := p.ready(m, c, ni)
		if err != nil {
			return err
		}
		var code abiv1.Code
		v, code, err = m.in.Score(h)
		if err != nil {
			return err
		}
		s, err = p.status(m, "score", code)
		return err
	})
	return v, s, err
}

// NodeScore is a node's score by name.
type NodeScore struct {
	Name  string
	Score int64
}

// NormalizeScore has the guest rewrite scores in place. Every node named
// must have been scored (and so synced) in this cycle. When the guest
// flagged the cycle's raw scores final (ScoresFinal) it is not called and
// the scores stay as they are.
func (p *Policy) NormalizeScore(ctx context.Context, c *Cycle, nodes []fwk.NodeInfo, scores []NodeScore) (Status, error) {
	var s Status
	err := p.with(ctx, "normalize_score", func(m *member) error {
		if err := p.prepare(m, c); err != nil {
			return err
		}
		if m.scoresFinal {
			s = success
			return nil
		}
		if p.normalizesRaw {
			return p.normalizeScores(m, nodes, scores, &s)
		}
		req := &abiv1.ScoreList{Scores: make([]*abiv1.NodeScore, len(scores))}
		for i, sc := range scores {
			h := m.handle(&p.handles, sc.Name)
			if err := p.syncNode(m, h, nodes[i]); err != nil {
				return err
			}
			req.Scores[i] = &abiv1.NodeScore{NodeHandle: h, Score: sc.Score}
		}
		code, err := m.in.Call(abiv1.Point_POINT_NORMALIZE_SCORE, engine.Marshal(req))
		if err != nil {
			return err
		}
		r, err := m.in.Result("normalize_score")
		if err != nil {
			return err
		}
		s = Status{Code: code, Reasons: r.GetReasons()}
		if code != abiv1.Code_CODE_SUCCESS {
			return nil
		}
		if len(r.GetScores()) != len(scores) {
			return p.CallError("normalize_score", engine.KindInvalid, fmt.Errorf("returned %d scores for %d nodes", len(r.GetScores()), len(scores)))
		}
		for i, ns := range r.GetScores() {
			if ns.NodeHandle != req.Scores[i].NodeHandle {
				return p.CallError("normalize_score", engine.KindInvalid, fmt.Errorf("reordered the scores"))
			}
			scores[i].Score = ns.Score
		}
		return nil
	})
	return s, err
}

// normalizeScores is NormalizeScore through wasmsched_normalize_scores: the
// handles and raw scores go as packed integers and the final scores come
// back so, with no message to encode or decode on either side. A batched
// cycle normalises every cached node (hundreds) for one node scored.
func (p *Policy) normalizeScores(m *member, nodes []fwk.NodeInfo, scores []NodeScore, s *Status) error {
	hs, err := p.syncNodes(m, nodes)
	if err != nil {
		return err
	}
	raw := make([]int64, len(scores))
	for i, sc := range scores {
		raw[i] = sc.Score
	}
	values, code, _, err := m.in.NormalizeScores(hs, raw)
	if err != nil {
		return err
	}
	if code != abiv1.Code_CODE_SUCCESS {
		*s, err = p.status(m, "normalize_score", code)
		return err
	}
	for i, v := range values {
		scores[i].Score = v
	}
	*s = success
	return nil
}

// NodeStatus is a Filter verdict for PostFilter.
type NodeStatus struct {
	Node   fwk.NodeInfo
	Status Status
}

// PostFilter asks the guest what to do when no node fits; it returns the
// nominated node name, if any.
func (p *Policy) PostFilter(ctx context.Context, c *Cycle, statuses []NodeStatus) (string, Status, error) {
	var (
		nominated string
		s         Status
	)
	err := p.with(ctx, "post_filter", func(m *member) error {
		if err := p.prepare(m, c); err != nil {
			return err
		}
		req := &abiv1.PostFilterRequest{}
		for _, st := range statuses {
			h, err := p.ready(m, c, st.Node)
			if err != nil {
				return err
			}
			req.Statuses = append(req.Statuses, &abiv1.NodeStatus{NodeHandle: h, Code: st.Status.Code, Reasons: st.Status.Reasons})
		}
		code, err := m.in.Call(abiv1.Point_POINT_POST_FILTER, engine.Marshal(req))
		if err != nil {
			return err
		}
		r, err := m.in.Result("post_filter")
		if err != nil {
			return err
		}
		nominated, s = r.GetNominatedNodeName(), Status{Code: code, Reasons: r.GetReasons()}
		return nil
	})
	return nominated, s, err
}

// PermitResult is the guest's Permit verdict.
type PermitResult struct {
	Status  Status
	Timeout time.Duration
	Actions []*abiv1.WaitingPodAction
}

// Permit asks whether the pod may bind on ni, given the pods waiting at
// Permit.
func (p *Policy) Permit(ctx context.Context, c *Cycle, ni fwk.NodeInfo, waiting []*abiv1.WaitingPod) (PermitResult, error) {
	var res PermitResult
	err := p.with(ctx, "permit", func(m *member) error {
		h, err := p.ready(m, c, ni)
		if err != nil {
			return err
		}
		code, err := m.in.Call(abiv1.Point_POINT_PERMIT, engine.Marshal(&abiv1.PermitRequest{NodeHandle: h, Waiting: waiting}))
		if err != nil {
			return err
		}
		r, err := m.in.Result("permit")
		if err != nil {
			return err
		}
		res = PermitResult{
			Status:  Status{Code: code, Reasons: r.GetReasons()},
			Timeout: time.Duration(r.GetWaitTimeoutMillis()) * time.Millisecond,
			Actions: r.GetActions(),
		}
		return nil
	})
	return res, err
}

// NodeCall runs Reserve, Unreserve, PreBind or PostBind on ni. Unreserve
// also returns the guest's verdicts on waiting pods.
func (p *Policy) NodeCall(ctx context.Context, pt abiv1.Point, c *Cycle, ni fwk.NodeInfo, waiting []*abiv1.WaitingPod) (Status, []*abiv1.WaitingPodAction, error) {
	var (
		s    Status
		acts []*abiv1.WaitingPodAction
	)
	err := p.with(ctx, engine.PointName(pt), func(m *member) error {
		h, err := p.ready(m, c, ni)
		if err != nil {
			return err
		}
		code, err := m.in.Call(pt, engine.Marshal(&abiv1.NodeHandleRequest{NodeHandle: h, Waiting: waiting}))
		if err != nil {
			return err
		}
		if code == abiv1.Code_CODE_SUCCESS && pt != abiv1.Point_POINT_UNRESERVE {
			s = success
			return nil
		}
		r, err := m.in.Result(engine.PointName(pt))
		if err != nil {
			return err
		}
		s, acts = Status{Code: code, Reasons: r.GetReasons()}, r.GetActions()
		return nil
	})
	return s, acts, err
}
