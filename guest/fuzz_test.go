package guest

import (
	"testing"
	"time"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// fuzzPolicy implements every point and reads every part of what the host
// sends through the SDK's views, so that the fuzzer reaches them with
// whatever the decoder makes of its bytes.
func fuzzPolicy() *Policy {
	return &Policy{
		Name: "fuzz",
		Settings: func(raw []byte) error {
			var s struct {
				Resource string `json:"resource"`
			}
			return ParseSettings(raw, &s)
		},
		PreFilter: func(c *Cycle) Status {
			n := 0
			c.EachNode(func(*NodeInfo) bool { n++; return true })
			c.State = n
			if v, ok := c.Pod.Label("restrict"); ok {
				c.RestrictNodes(v)
				_ = c.NodeByName(v)
			}
			return OK()
		},
		Filter: func(c *Cycle, n *NodeInfo) Status {
			p := c.Pod
			if !n.MatchesNodeSelector(p) {
				return RejectUnresolvable("fuzz: node selector of %s", p.Key())
			}
			if t := p.FirstUntolerated(n.Taints(), "NoSchedule", "NoExecute"); t != nil {
				return Reject("fuzz: taint %s=%s:%s", t.GetKey(), t.GetValue(), t.GetEffect())
			}
			if n.Free("cpu") < p.Request("cpu") || n.Free("memory") < p.Request("memory") || n.Free("nvidia.com/gpu") < p.Request("nvidia.com/gpu") {
				return Reject("fuzz: resources on %s in zone %s", n.Name(), n.Zone())
			}
			for _, ps := range n.Pods() {
				if MatchSelector(&abiv1.LabelSelector{MatchLabels: p.GetLabels()}, ps.GetLabels()) {
					return Reject("fuzz: pod %s/%s", ps.GetNamespace(), ps.GetName())
				}
			}
			return OK()
		},
		Score: func(c *Cycle, n *NodeInfo) (int64, Status) {
			v, _ := n.Label("score")
			i, ok := ParseInt(v)
			if !ok {
				return 0, Errorf("fuzz: score label %q", v)
			}
			a, _ := n.Annotation("a")
			_, _ = c.Pod.Annotation(a)
			return i, OK()
		},
		NormalizeScore: MinMaxNormalize,
		PostFilter: func(c *Cycle, statuses []NodeStatus) (string, Status) {
			for _, s := range statuses {
				if s.Status.Code == UnschedulableAndUnresolvable {
					continue
				}
				return s.Node.Name(), OK()
			}
			return "", Status{Code: Unschedulable}
		},
		Reserve: func(c *Cycle, n *NodeInfo) Status { return OK() },
		Unreserve: func(c *Cycle, n *NodeInfo, waiting []WaitingPod) []WaitingPodAction {
			var out []WaitingPodAction
			for _, w := range waiting {
				out = append(out, WaitingPodAction{UID: w.GetUid(), Reason: "fuzz: " + w.GetNodeName()})
			}
			return out
		},
		Permit: func(c *Cycle, n *NodeInfo, waiting []WaitingPod) PermitResult {
			r := PermitResult{Status: Status{Code: Wait, Reasons: []string{"fuzz"}}, Timeout: time.Second}
			for _, w := range waiting {
				if v, ok := Lookup(w.GetLabels(), "gang"); ok && v == n.Name() {
					r.Actions = append(r.Actions, WaitingPodAction{UID: w.GetUid(), Allow: true})
				}
			}
			return r
		},
		PreBind:  func(c *Cycle, n *NodeInfo) Status { return OK() },
		PostBind: func(c *Cycle, n *NodeInfo) {},
	}
}

func marshal(t testing.TB, m marshaler) []byte {
	b := make([]byte, m.SizeVT())
	if _, err := m.MarshalToSizedBufferVT(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzDispatch feeds the SDK every request the host can send, decoded the
// way the exports decode them (native build, the same code as in the
// module): InitRequest, NodeSync, CycleRequest, then Filter and Score on a
// handle and one message-carrying point. Whatever the bytes, the SDK must
// not panic, must answer a valid status code, and must leave a detail the
// host can decode.
func FuzzDispatch(f *testing.F) {
	kv := func(k, v string) *abiv1.KeyValue { return &abiv1.KeyValue{Key: k, Value: v} }
	initReq := marshal(f, &abiv1.InitRequest{HostAbiVersion: ABIVersion, PolicyName: "fuzz", Settings: []byte(`{"resource": "x"}`)})
	node := func(h int32, name string) *abiv1.NodeInfo {
		return &abiv1.NodeInfo{Handle: h, Generation: 7, PodCount: 1,
			Node: &abiv1.Node{Name: name, Labels: []*abiv1.KeyValue{kv("score", "42"), kv("topology.kubernetes.io/zone", "a")},
				Taints:      []*abiv1.Taint{{Key: "k", Value: "v", Effect: "NoSchedule"}},
				Allocatable: &abiv1.Resources{MilliCpu: 4000, Memory: 1 << 30, Scalars: []*abiv1.Scalar{{Name: "nvidia.com/gpu", Value: 2}}}},
			Requested: &abiv1.Resources{MilliCpu: 100},
			Pods:      []*abiv1.PodSummary{{Name: "p", Namespace: "d", Labels: []*abiv1.KeyValue{kv("app", "x")}}}}
	}
	syncReq := marshal(f, &abiv1.NodeSync{Upserts: []*abiv1.NodeInfo{node(0, "a"), node(3, "b")}, Removed: []int32{1, -1, 1 << 30}})
	cycleReq := marshal(f, &abiv1.CycleRequest{Cycle: 1, Pod: &abiv1.Pod{Name: "web", Namespace: "d", Uid: "u",
		Labels:       []*abiv1.KeyValue{kv("app", "y"), kv("restrict", "a")},
		NodeSelector: []*abiv1.KeyValue{kv("score", "42")},
		RequiredNodeAffinity: []*abiv1.NodeSelectorTerm{{MatchExpressions: []*abiv1.Requirement{{Key: "score", Operator: "Gt", Values: []string{"7"}}},
			MatchFields: []*abiv1.Requirement{{Key: "metadata.name", Operator: "In", Values: []string{"a", "b"}}}}},
		Tolerations: []*abiv1.Toleration{{Key: "k", Operator: "Equal", Value: "v"}},
		Requests:    &abiv1.Resources{MilliCpu: 100, Scalars: []*abiv1.Scalar{{Name: "nvidia.com/gpu", Value: 1}}}}})
	scores := marshal(f, &abiv1.ScoreList{Scores: []*abiv1.NodeScore{{NodeHandle: 0, Score: -5}, {NodeHandle: 3, Score: 1 << 62}}})
	permit := marshal(f, &abiv1.PermitRequest{NodeHandle: 3, Waiting: []*abiv1.WaitingPod{{Uid: "w", Labels: []*abiv1.KeyValue{kv("gang", "b")}}}})
	post := marshal(f, &abiv1.PostFilterRequest{Statuses: []*abiv1.NodeStatus{{NodeHandle: 0, Code: 4}, {NodeHandle: 3, Code: 3, Reasons: []string{"r"}}}})
	nodeReq := marshal(f, &abiv1.NodeHandleRequest{NodeHandle: 0, Waiting: []*abiv1.WaitingPod{{Uid: "w"}}})
	for _, tc := range []struct {
		point uint32
		req   []byte
	}{
		{uint32(abiv1.Point_POINT_NORMALIZE_SCORE), scores},
		{uint32(abiv1.Point_POINT_PERMIT), permit},
		{uint32(abiv1.Point_POINT_POST_FILTER), post},
		{uint32(abiv1.Point_POINT_RESERVE), nodeReq},
		{uint32(abiv1.Point_POINT_UNRESERVE), nodeReq},
		{uint32(abiv1.Point_POINT_PRE_BIND), nodeReq},
		{uint32(abiv1.Point_POINT_POST_BIND), nodeReq},
		{99, nil},
	} {
		f.Add(initReq, syncReq, cycleReq, tc.req, tc.point, uint32(3))
	}
	f.Add([]byte{0x0a, 0xff}, []byte{0x0a, 0x80, 0x80, 0x80, 0x80, 0x10}, []byte{0x12, 0x00}, []byte{0xff}, uint32(6), uint32(1<<31))

	f.Fuzz(func(t *testing.T, initB, syncB, cycleB, callB []byte, point, handle uint32) {
		inst = &instance{policy: fuzzPolicy()}
		defer func() { inst = &instance{} }()

		send := func(b []byte, extra uint32) uint32 {
			copy(inst.buffer(uint32(len(b))), b)
			// The length the host claims may exceed what it wrote.
			return uint32(len(b)) + extra%2
		}
		info := &abiv1.PolicyInfo{}
		code := inst.init(send(initB, point))
		expectCode(t, "init", code)
		if err := info.UnmarshalVT(inst.marshalResult()); err != nil {
			t.Fatalf("init: undecodable PolicyInfo: %v", err)
		}
		if (code == uint32(Success)) != (info.Code == abiv1.Code_CODE_SUCCESS) {
			t.Fatalf("init answered %d but PolicyInfo.code %d", code, info.Code)
		}
		if code != uint32(Success) {
			return
		}
		expectCode(t, "sync", inst.sync(send(syncB, handle)))
		expectResult(t, "sync")
		expectCode(t, "cycle", inst.startCycle(send(cycleB, 0)))
		expectResult(t, "cycle")
		expectCode(t, "filter", uint32(inst.filter(handle)>>32))
		expectResult(t, "filter")
		expectCode(t, "score", uint32(inst.score(handle)>>32))
		expectResult(t, "score")
		// score_nodes reads callB as handles; the length claimed may
		// exceed the buffer.
		n := send(callB, point) / 4
		code2, bad := inst.scoreNodes(n)
		expectCode(t, "score_nodes", uint32(code2))
		expectResult(t, "score_nodes")
		switch {
		case code2 == Success && len(inst.scores) != 8*int(n):
			t.Fatalf("score_nodes: %d bytes of scores for %d nodes", len(inst.scores), n)
		case code2 != Success && bad > n:
			t.Fatalf("score_nodes: failure at node %d of %d", bad, n)
		}
		expectCode(t, "call", inst.call(point, send(callB, 0)))
		expectResult(t, "call")
	})
}

func expectCode(t *testing.T, call string, code uint32) {
	t.Helper()
	if code < uint32(Success) || code > uint32(Pending) {
		t.Fatalf("%s: answered status code %d", call, code)
	}
}

func expectResult(t *testing.T, call string) {
	t.Helper()
	var r abiv1.Result
	if err := r.UnmarshalVT(inst.marshalResult()); err != nil {
		t.Fatalf("%s: undecodable Result: %v", call, err)
	}
}
