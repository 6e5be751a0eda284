package guest

import (
	"encoding/binary"
	"time"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// maxHandle bounds node handles so that a corrupt message cannot make the
// instance allocate a huge slice.
const maxHandle = 1 << 22

// marshaler is what the result of a call must offer; both abiv1.Result and
// abiv1.PolicyInfo do.
type marshaler interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
}

// instance is the state of this module instance. The export functions are
// thin wrappers around its methods, so the dispatch logic is testable
// without WebAssembly.
type instance struct {
	policy *Policy
	ready  bool

	nodes []*NodeInfo // resident snapshot, by handle
	// keepMessages keeps each resident node's decoded message from the
	// sync on (policies that want pods or all nodes read them in loops over
	// every node); otherwise views keep only their encoding and index.
	keepMessages bool
	// cluster holds the cluster objects and tenant usage the host syncs.
	cluster clusterState
	cycle   *Cycle

	in  []byte // the host writes requests here (see buffer)
	out []byte // the marshalled result of the last call
	// restBuf holds a NodeSync's fields other than its node entries, for
	// decoding (syncRest).
	restBuf []byte
	// added counts the bytes of node encodings made resident since the
	// heap was last given headroom.
	added int
	// scores holds the final scores of the last wasmsched_score_nodes, as
	// little-endian int64s, and nodeScores the NormalizeScore argument.
	scores     []byte
	nodeScores []NodeScore

	// The detail of the last call, marshalled only if the host asks.
	result abiv1.Result
	// seq numbers distinct Filter rejections, so the host fetches the
	// reasons of a repeated rejection only once (see filter).
	seq         uint32
	lastCode    Code
	lastReasons []string
	info        *abiv1.PolicyInfo
	pending     marshaler
	// cycleFlags: the host reads CycleFlag bits in wasmsched_cycle's
	// answer (InitRequest.cycle_flags).
	cycleFlags bool
	// marks[h] == mark when handle h is in the parent placement of the
	// PlacementGenerate in progress (see group.go's markParent).
	marks []uint32
	mark  uint32
	// groups keeps the group of the last placement call (group.go).
	groups groupCache
}

var inst = &instance{}

// buffer returns the input buffer, grown to at least n bytes.
func (in *instance) buffer(n uint32) []byte {
	if uint32(cap(in.in)) < n {
		in.in = make([]byte, n, max(n, 2*uint32(cap(in.in))))
	}
	in.in = in.in[:n]
	return in.in
}

// errOverrun is the decode error for a request longer than the buffer the
// host was given.
var errOverrun = errorString("request length exceeds the buffer obtained from wasmsched_buffer")

type errorString string

func (e errorString) Error() string { return string(e) }

// unmarshaler is implemented by every generated ABI message.
type unmarshaler interface{ UnmarshalVT([]byte) error }

// request returns the first n bytes the host wrote, or errOverrun when n
// exceeds the buffer it was given.
func (in *instance) request(n uint32) ([]byte, error) {
	if uint64(n) > uint64(len(in.in)) {
		return nil, errOverrun
	}
	return in.in[:n], nil
}

// decode decodes the first n bytes the host wrote into m.
func (in *instance) decode(n uint32, m unmarshaler) error {
	req, err := in.request(n)
	if err != nil {
		return err
	}
	return m.UnmarshalVT(req)
}

// fail records an error result and returns its code.
func (in *instance) fail(code Code, reason string) uint32 {
	in.setResult(Status{Code: code, Reasons: []string{reason}})
	return uint32(code)
}

func (in *instance) setResult(s Status) {
	in.result = abiv1.Result{}
	in.result.Code = abiv1.Code(s.Code)
	in.result.Reasons = s.Reasons
	in.pending = &in.result
}

// status records s as the result of a call and returns its code.
func (in *instance) status(s Status) uint32 {
	if s.Code == Success && len(s.Reasons) == 0 {
		in.pending = nil
		return uint32(Success)
	}
	in.setResult(s)
	return uint32(s.Code)
}

// marshalResult marshals the last call's detail into out. An empty result
// (nothing to report) marshals to zero bytes.
func (in *instance) marshalResult() []byte {
	if in.pending == nil {
		return in.out[:0]
	}
	n := in.pending.SizeVT()
	if cap(in.out) < n {
		in.out = make([]byte, n)
	}
	in.out = in.out[:n]
	if _, err := in.pending.MarshalToSizedBufferVT(in.out); err != nil {
		return in.out[:0]
	}
	return in.out
}

// init handles wasmsched_init.
func (in *instance) init(n uint32) uint32 {
	info := &abiv1.PolicyInfo{AbiVersion: ABIVersion, Sdk: "wasmsched-go-sdk/1"}
	in.info = info
	in.pending = info
	fail := func(reason string) uint32 {
		info.Code = abiv1.Code_CODE_ERROR
		info.Reasons = []string{reason}
		return uint32(Error)
	}
	if in.policy == nil {
		return fail("no policy registered: call guest.Register from an init function")
	}
	var req abiv1.InitRequest
	if err := in.decode(n, &req); err != nil {
		return fail("decode InitRequest: " + err.Error())
	}
	if req.HostAbiVersion != ABIVersion {
		return fail("host speaks ABI version " + itoa(int64(req.HostAbiVersion)) + ", this policy speaks ABI version " + itoa(ABIVersion))
	}
	in.cycleFlags = req.CycleFlags
	if in.policy.Settings != nil {
		if err := in.policy.Settings(req.Settings); err != nil {
			return fail(err.Error())
		}
	}
	info.Code = abiv1.Code_CODE_SUCCESS
	info.Points = in.policy.points()
	info.WantsPods = in.policy.WantsPods
	info.WantsAllNodes = in.policy.WantsAllNodes
	info.AcceptsUsage = true
	// Read after the settings hook, which may set them.
	for _, k := range in.policy.Context {
		info.ContextKinds = append(info.ContextKinds, &abiv1.ContextKind{Group: k.Group, Version: k.Version, Resource: k.Resource})
	}
	info.WantsNamespaceUsage = in.policy.NamespaceUsage
	info.UsageLabelKeys = in.policy.UsageLabelKeys
	info.Signature = in.policy.Signature.message()
	info.Requeue = in.policy.Requeue.message()
	info.WantsPodGroups = in.policy.WantsPodGroups
	in.cluster = clusterState{kinds: append([]Kind{}, in.policy.Context...)}
	in.keepMessages = in.policy.WantsPods || in.policy.WantsAllNodes
	in.ready = true
	return uint32(Success)
}

// sync handles wasmsched_sync.
func (in *instance) sync(n uint32) uint32 {
	b, err := in.request(n)
	if err != nil {
		return in.fail(Error, "decode NodeSync: "+err.Error())
	}
	// Where the views keep encodings rather than messages (see nodeIndex),
	// the nodes and usage updates are read from their encodings (wire.go)
	// and only the other fields are decoded.
	var req abiv1.NodeSync
	if in.keepMessages {
		err = req.UnmarshalVT(b)
	} else {
		var rest []byte
		if rest, err = in.syncRest(b); err == nil {
			err = req.UnmarshalVT(rest)
		}
	}
	if err != nil {
		return in.fail(Error, "decode NodeSync: "+err.Error())
	}
	// Checked first, so that a refused sync changes nothing of the objects.
	if err := in.cluster.checkKinds(&req); err != nil {
		return in.fail(Error, err.Error())
	}
	for _, h := range req.Removed {
		if h >= 0 && int(h) < len(in.nodes) {
			in.nodes[h] = nil
		}
	}
	for _, ni := range req.Upserts {
		if code := in.putNode(newNodeInfo(ni, nil, true)); code != uint32(Success) {
			return code
		}
	}
	if !in.keepMessages {
		if code := eachEntry(b, tagUpsert, in.upsert); code != uint32(Success) {
			return code
		}
		if in.added >= minHeadroom {
			headroom(in.added)
			in.added = 0
		}
	}
	for _, u := range req.Usage {
		if code := in.useNode(u, nil); code != uint32(Success) {
			return code
		}
	}
	if !in.keepMessages {
		if code := eachEntry(b, tagUsage, in.usage); code != uint32(Success) {
			return code
		}
	}
	in.cluster.apply(&req)
	in.pending = nil
	return uint32(Success)
}

// minHeadroom is how many bytes of node encodings made resident call for
// headroom: a few nodes at a time fit in what the collector keeps free.
const minHeadroom = 256 << 10

// NodeSync's node entries: upserts (field 1) and usage updates (field 3).
const (
	tagUpsert = 1<<3 | 2
	tagUsage  = 3<<3 | 2
)

// syncRest returns the fields of an encoded NodeSync other than its node
// entries, concatenated into a buffer the instance reuses (the decoder
// copies what it keeps), having checked that the whole request reads as
// fields. Where the views keep messages, none of it is needed.
func (in *instance) syncRest(b []byte) ([]byte, error) {
	rest := in.restBuf[:0]
	for len(b) > 0 {
		tag, field, _, err := nextField(b)
		if err != nil {
			return nil, err
		}
		b = b[len(field):]
		if tag != tagUpsert && tag != tagUsage {
			rest = append(rest, field...)
		}
	}
	in.restBuf = rest
	return rest, nil
}

// eachEntry calls fn with the encoding of each field tagged tag of an
// encoded NodeSync that syncRest read, in order, until fn fails. The
// entries are visited one at a time, not collected: a list of views into
// the request would be thousands of pointers into one large buffer, which
// TinyGo's collector resolves each by walking back to the buffer's start.
func eachEntry(b []byte, tag uint64, fn func([]byte) uint32) uint32 {
	for len(b) > 0 {
		t, field, v, err := nextField(b)
		if err != nil {
			return uint32(Success) // not met: syncRest read every field
		}
		b = b[len(field):]
		if t == tag {
			if code := fn(v); code != uint32(Success) {
				return code
			}
		}
	}
	return uint32(Success)
}

// upsert makes a resident node of the encoding of an upsert, copied.
func (in *instance) upsert(enc []byte) uint32 {
	raw := append(make([]byte, 0, len(enc)), enc...)
	in.added += len(raw)
	ni, ok, err := indexNode(raw)
	if err != nil || !ok {
		// The generated decoder has the last word on what the reader
		// does not take.
		m := &abiv1.NodeInfo{}
		if err := m.UnmarshalVT(raw); err != nil {
			return in.fail(Error, "decode NodeSync: "+err.Error())
		}
		ni = newNodeInfo(m, raw, false)
	}
	return in.putNode(ni)
}

// usage applies the encoding of a usage update, copied.
func (in *instance) usage(enc []byte) uint32 {
	raw := append(make([]byte, 0, len(enc)), enc...)
	u := &abiv1.NodeUsage{}
	if err := u.UnmarshalVT(raw); err != nil {
		return in.fail(Error, "decode NodeSync: "+err.Error())
	}
	return in.useNode(u, raw)
}

// putNode makes ni the resident node of its handle.
func (in *instance) putNode(ni *NodeInfo) uint32 {
	h := ni.handle
	if h < 0 || h >= maxHandle {
		return in.fail(Error, "node handle "+itoa(int64(h))+" out of range")
	}
	if int(h) >= len(in.nodes) {
		grown := make([]*NodeInfo, max(int(h)+1, 2*len(in.nodes)))
		copy(grown, in.nodes)
		in.nodes = grown
	}
	in.nodes[h] = ni
	return uint32(Success)
}

// useNode applies usage update u, whose encoding is raw (nil where the
// views keep messages), to its resident node.
func (in *instance) useNode(u *abiv1.NodeUsage, raw []byte) uint32 {
	h := u.Handle
	if h < 0 || int(h) >= len(in.nodes) || in.nodes[h] == nil {
		return in.fail(Error, "usage update for node handle "+itoa(int64(h))+", which was never synced")
	}
	in.nodes[h] = withUsage(in.nodes[h], u, raw, in.keepMessages)
	return uint32(Success)
}

// nextField splits the first field off an encoded message: its tag, the
// field's bytes (tag included) and, for a length-delimited field, its
// payload.
func nextField(b []byte) (tag uint64, field, payload []byte, err error) {
	tag, n := uvarint(b)
	if n <= 0 {
		return 0, nil, nil, errorString("bad field tag")
	}
	rest := b[n:]
	switch tag & 7 {
	case 0:
		if _, n = uvarint(rest); n <= 0 {
			return 0, nil, nil, errorString("bad varint")
		}
	case 1:
		n = 8
	case 5:
		n = 4
	case 2:
		l, m := uvarint(rest)
		if m <= 0 || l > uint64(len(rest)-m) {
			return 0, nil, nil, errorString("bad length")
		}
		payload, n = rest[m:m+int(l)], m+int(l)
	default:
		return 0, nil, nil, errorString("bad wire type")
	}
	if n > len(rest) {
		return 0, nil, nil, errorString("truncated field")
	}
	return tag, b[:len(b)-len(rest)+n], payload, nil
}

// uvarint decodes a protobuf varint: the value and the bytes read, 0 when b
// ends first, -1 when it is longer than ten bytes.
func uvarint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < len(b); i++ {
		if i == 10 {
			return 0, -1
		}
		c := b[i]
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}

// node returns the resident node with handle h, or nil.
func (in *instance) node(h uint32) *NodeInfo {
	if h >= uint32(len(in.nodes)) {
		return nil
	}
	return in.nodes[h]
}

func (in *instance) unknownNode(h uint32) uint32 {
	return in.fail(Error, "node handle "+itoa(int64(h))+" was never synced")
}

// startCycle handles wasmsched_cycle: it installs the pod and runs PreFilter.
func (in *instance) startCycle(n uint32) uint32 {
	var req abiv1.CycleRequest
	if err := in.decode(n, &req); err != nil {
		in.cycle = nil
		return in.fail(Error, "decode CycleRequest: "+err.Error())
	}
	if req.Pod == nil {
		in.cycle = nil
		return in.fail(Error, "CycleRequest without a pod")
	}
	c := &Cycle{ID: req.Cycle, Pod: &Pod{msg: req.Pod}, group: NewPodGroup(req.PodGroup), groupCycle: req.GroupCycle, in: in}
	in.cycle = c
	if in.policy.PreFilter == nil {
		in.pending = nil
		return uint32(Success)
	}
	s := in.policy.PreFilter(c)
	var code uint32
	if c.restricted {
		in.setResult(s)
		in.result.NodeSubset = true
		in.result.NodeNames = c.restrict
		code = uint32(s.Code)
	} else {
		code = in.status(s)
	}
	if !in.cycleFlags {
		return code
	}
	if c.scoresFinal {
		code |= uint32(abiv1.CycleFlag_CYCLE_FLAG_SCORES_FINAL)
	}
	if !c.restricted && len(s.Reasons) == 0 {
		// The Result would say nothing the code does not.
		code |= uint32(abiv1.CycleFlag_CYCLE_FLAG_NO_DETAIL)
	}
	return code
}

// normalizes reports whether NormalizeScore runs in the current cycle: the
// policy has one and did not skip it (Cycle.SkipNormalizeScore).
func (in *instance) normalizes() bool {
	return in.policy.NormalizeScore != nil && (in.cycle == nil || !in.cycle.scoresFinal)
}

// needCycle reports (by returning a non-zero code) a call made outside a
// cycle.
func (in *instance) needCycle() uint32 {
	if in.cycle == nil {
		return in.fail(Error, "no scheduling cycle started on this instance")
	}
	return 0
}

// filter handles wasmsched_filter: the code in the high 32 bits and, for a
// rejection, a sequence number in the low 32 that changes whenever the
// rejection (code and reasons) differs from the previous one. The host
// caches the reasons of the last sequence number it fetched, so a policy
// rejecting thousands of nodes for the same reason costs one fetch.
func (in *instance) filter(h uint32) uint64 {
	if c := in.needCycle(); c != 0 {
		return in.withSeq(Code(c))
	}
	n := in.node(h)
	if n == nil {
		return in.withSeq(Code(in.unknownNode(h)))
	}
	if in.policy.Filter == nil {
		in.pending = nil
		return uint64(Success) << 32
	}
	s := in.policy.Filter(in.cycle, n)
	if s.Code == Success && len(s.Reasons) == 0 {
		in.pending = nil
		return uint64(Success) << 32
	}
	in.setResult(s)
	return in.withSeq(s.Code)
}

// withSeq numbers the pending result: the same number as the previous call
// when code and reasons are unchanged.
func (in *instance) withSeq(code Code) uint64 {
	reasons := in.result.Reasons
	if in.seq == 0 || code != in.lastCode || !sameStrings(reasons, in.lastReasons) {
		in.seq++
		// A copy: a policy may reuse and edit its reasons slice.
		in.lastCode, in.lastReasons = code, append([]string(nil), reasons...)
	}
	return uint64(code)<<32 | uint64(in.seq)
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// score handles wasmsched_score: the code in the high 32 bits, the score as
// an int32 in the low 32.
func (in *instance) score(h uint32) uint64 {
	if c := in.needCycle(); c != 0 {
		return uint64(c) << 32
	}
	n := in.node(h)
	if n == nil {
		return uint64(in.unknownNode(h)) << 32
	}
	if in.policy.Score == nil {
		in.pending = nil
		return uint64(Success) << 32
	}
	v, s := in.policy.Score(in.cycle, n)
	if s.Code == Success && (v < -1<<31 || v > 1<<31-1) {
		s = Errorf("score %d does not fit in an int32", v)
	}
	code := in.status(s)
	return uint64(code)<<32 | uint64(uint32(int32(v)))
}

// scoreNodes handles wasmsched_score_nodes: Score on each of the n resident
// nodes whose handles the host wrote to the buffer as little-endian int32s,
// then NormalizeScore over all of them, in one call. On success it returns
// Success and fills in.scores with the n final scores; otherwise the code
// and the index of the node whose Score failed, or n when NormalizeScore
// failed, with the reasons as the detail.
//
// Without normalize (wasmsched_score_nodes_raw) it returns the raw scores
// and leaves NormalizeScore to a later call.
func (in *instance) scoreNodes(n uint32, normalize bool) (Code, uint32) {
	if c := in.needCycle(); c != 0 {
		return Code(c), 0
	}
	if uint64(n)*4 > uint64(len(in.in)) {
		return Code(in.fail(Error, errOverrun.Error())), 0
	}
	p := in.policy
	if cap(in.nodeScores) < int(n) {
		in.nodeScores = make([]NodeScore, n)
	}
	scores := in.nodeScores[:n]
	for i := range scores {
		h := binary.LittleEndian.Uint32(in.in[4*i:])
		node := in.node(h)
		if node == nil {
			return Code(in.unknownNode(h)), uint32(i)
		}
		scores[i] = NodeScore{Node: node}
		if p.Score == nil {
			continue
		}
		v, s := p.Score(in.cycle, node)
		// The common case, a plain success in range, without a call: calls
		// are dear in Go compiled to WebAssembly, and this runs per node.
		if s.Code != Success || len(s.Reasons) > 0 || v < -1<<31 || v > 1<<31-1 {
			if s.Code == Success && len(s.Reasons) == 0 {
				s = Errorf("score %d does not fit in an int32", v)
			}
			if code := in.status(s); code != uint32(Success) {
				return Code(code), uint32(i)
			}
		}
		scores[i].Score = v
	}
	if normalize && in.normalizes() {
		if code := in.status(p.NormalizeScore(in.cycle, scores)); code != uint32(Success) {
			return Code(code), n
		}
	}
	in.putScores(scores)
	in.pending = nil
	return Success, 0
}

// normalizeScores handles wasmsched_normalize_scores: NormalizeScore over n
// resident nodes, whose handles the host wrote to the buffer as n
// little-endian int32s followed by their n raw scores as little-endian
// int64s. On success it returns Success and fills in.scores with the n
// final scores; otherwise the code and the index of an unknown node, or n
// when NormalizeScore failed, with the reasons as the detail. It is
// NormalizeScore without a message to decode or encode: the host calls it
// once per batched cycle, over every cached node.
func (in *instance) normalizeScores(n uint32) (Code, uint32) {
	if c := in.needCycle(); c != 0 {
		return Code(c), 0
	}
	if uint64(n)*12 > uint64(len(in.in)) {
		return Code(in.fail(Error, errOverrun.Error())), 0
	}
	if cap(in.nodeScores) < int(n) {
		in.nodeScores = make([]NodeScore, n)
	}
	scores := in.nodeScores[:n]
	raw := in.in[4*n:]
	for i := range scores {
		h := binary.LittleEndian.Uint32(in.in[4*i:])
		node := in.node(h)
		if node == nil {
			return Code(in.unknownNode(h)), uint32(i)
		}
		scores[i] = NodeScore{Node: node, Score: int64(binary.LittleEndian.Uint64(raw[8*i:]))}
	}
	if in.normalizes() {
		if code := in.status(in.policy.NormalizeScore(in.cycle, scores)); code != uint32(Success) {
			clear(scores)
			return Code(code), n
		}
	}
	in.putScores(scores)
	in.pending = nil
	return Success, 0
}

// putScores writes scores to in.scores as little-endian int64s and lets go
// of their nodes.
func (in *instance) putScores(scores []NodeScore) {
	n := len(scores)
	if cap(in.scores) < 8*n {
		in.scores = make([]byte, 8*n)
	}
	in.scores = in.scores[:8*n]
	for i, sc := range scores {
		binary.LittleEndian.PutUint64(in.scores[8*i:], uint64(sc.Score))
		scores[i] = NodeScore{} // keep no node alive past the call
	}
}

// call handles wasmsched_call, the generic entry for the points that carry
// a message.
func (in *instance) call(point, n uint32) uint32 {
	switch abiv1.Point(point) {
	case abiv1.Point_POINT_SIGN:
		return in.sign(n)
	case abiv1.Point_POINT_PLACEMENT_GENERATE:
		return in.placementGenerate(n)
	case abiv1.Point_POINT_PLACEMENT_SCORE:
		return in.placementScore(n)
	case abiv1.Point_POINT_NORMALIZE_PLACEMENT_SCORE:
		return in.normalizePlacementScore(n)
	case abiv1.Point_POINT_POD_GROUP_POST_FILTER:
		return in.podGroupPostFilter(n)
	}
	if c := in.needCycle(); c != 0 {
		return c
	}
	p := in.policy
	switch abiv1.Point(point) {
	case abiv1.Point_POINT_FILTER:
		return in.filterChanged(n)

	case abiv1.Point_POINT_SELECT_VICTIMS:
		return in.selectVictims(n)

	case abiv1.Point_POINT_NORMALIZE_SCORE:
		var m abiv1.ScoreList
		if err := in.decode(n, &m); err != nil {
			return in.fail(Error, "decode ScoreList: "+err.Error())
		}
		scores := make([]NodeScore, len(m.Scores))
		for i, s := range m.Scores {
			if scores[i].Node = in.node(uint32(s.NodeHandle)); scores[i].Node == nil {
				return in.unknownNode(uint32(s.NodeHandle))
			}
			scores[i].Score = s.Score
		}
		s := OK()
		if in.normalizes() {
			s = p.NormalizeScore(in.cycle, scores)
		}
		in.setResult(s)
		for i, sc := range scores {
			m.Scores[i].Score = sc.Score
		}
		in.result.Scores = m.Scores
		return uint32(s.Code)

	case abiv1.Point_POINT_POST_FILTER:
		var m abiv1.PostFilterRequest
		if err := in.decode(n, &m); err != nil {
			return in.fail(Error, "decode PostFilterRequest: "+err.Error())
		}
		if p.PostFilter == nil {
			return in.status(Status{Code: Unschedulable})
		}
		statuses := make([]NodeStatus, 0, len(m.Statuses))
		for _, st := range m.Statuses {
			n := in.node(uint32(st.NodeHandle))
			if n == nil {
				return in.unknownNode(uint32(st.NodeHandle))
			}
			statuses = append(statuses, NodeStatus{Node: n, Status: Status{Code: Code(st.Code), Reasons: st.Reasons}})
		}
		nominated, s := p.PostFilter(in.cycle, statuses)
		in.setResult(s)
		in.result.NominatedNodeName = nominated
		return uint32(s.Code)

	case abiv1.Point_POINT_PERMIT:
		var m abiv1.PermitRequest
		if err := in.decode(n, &m); err != nil {
			return in.fail(Error, "decode PermitRequest: "+err.Error())
		}
		n := in.node(uint32(m.NodeHandle))
		if n == nil {
			return in.unknownNode(uint32(m.NodeHandle))
		}
		if p.Permit == nil {
			return in.status(OK())
		}
		r := p.Permit(in.cycle, n, waitingPods(m.Waiting))
		in.setResult(r.Status)
		in.result.WaitTimeoutMillis = int64(r.Timeout / time.Millisecond)
		in.result.Actions = actions(r.Actions)
		return uint32(r.Status.Code)

	case abiv1.Point_POINT_RESERVE, abiv1.Point_POINT_UNRESERVE, abiv1.Point_POINT_PRE_BIND, abiv1.Point_POINT_POST_BIND:
		var m abiv1.NodeHandleRequest
		if err := in.decode(n, &m); err != nil {
			return in.fail(Error, "decode NodeHandleRequest: "+err.Error())
		}
		n := in.node(uint32(m.NodeHandle))
		if n == nil {
			return in.unknownNode(uint32(m.NodeHandle))
		}
		switch abiv1.Point(point) {
		case abiv1.Point_POINT_RESERVE:
			if p.Reserve != nil {
				return in.status(p.Reserve(in.cycle, n))
			}
		case abiv1.Point_POINT_UNRESERVE:
			if p.Unreserve != nil {
				acts := p.Unreserve(in.cycle, n, waitingPods(m.Waiting))
				in.setResult(OK())
				in.result.Actions = actions(acts)
				return uint32(Success)
			}
		case abiv1.Point_POINT_PRE_BIND:
			if p.PreBind != nil {
				return in.status(p.PreBind(in.cycle, n))
			}
		case abiv1.Point_POINT_POST_BIND:
			if p.PostBind != nil {
				p.PostBind(in.cycle, n)
			}
		}
		return in.status(OK())
	}
	return in.fail(Error, "unknown extension point "+itoa(int64(point)))
}

func waitingPods(ms []*abiv1.WaitingPod) []WaitingPod {
	out := make([]WaitingPod, len(ms))
	for i, m := range ms {
		out[i] = WaitingPod{msg: m}
	}
	return out
}

func actions(as []WaitingPodAction) []*abiv1.WaitingPodAction {
	out := make([]*abiv1.WaitingPodAction, len(as))
	for i, a := range as {
		out[i] = &abiv1.WaitingPodAction{Uid: a.UID, Allow: a.Allow, Reason: a.Reason}
	}
	return out
}

// itoa formats an integer without pulling strconv into every code path.
func itoa(v int64) string {
	if v == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	neg := v < 0
	u := uint64(v)
	if neg {
		u = uint64(-v)
	}
	for u > 0 {
		i--
		b[i] = byte('0' + u%10)
		u /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
