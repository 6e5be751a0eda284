package guest

import (
	"bytes"
	"fmt"
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
		Context:        []Kind{KindNamespace, KindResourceSlice},
		NamespaceUsage: true,
		PreFilter: func(c *Cycle) Status {
			n := 0
			c.EachNode(func(*NodeInfo) bool { n++; return true })
			readContext(c)
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
				if MatchSelector(&abiv1.LabelSelector{MatchLabels: p.Labels()}, ps.GetLabels()) {
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
				out = append(out, WaitingPodAction{UID: w.UID(), Reason: "fuzz: " + w.NodeName()})
			}
			return out
		},
		Permit: func(c *Cycle, n *NodeInfo, waiting []WaitingPod) PermitResult {
			r := PermitResult{Status: Status{Code: Wait, Reasons: []string{"fuzz"}}, Timeout: time.Second}
			for _, w := range waiting {
				if v, ok := Lookup(w.Labels(), "gang"); ok && v == n.Name() {
					r.Actions = append(r.Actions, WaitingPodAction{UID: w.UID(), Allow: true})
				}
			}
			return r
		},
		PreBind:  func(c *Cycle, n *NodeInfo) Status { return OK() },
		PostBind: func(c *Cycle, n *NodeInfo) {},
		AddPod: func(c *Cycle, pod *abiv1.PodSummary, n *NodeInfo) Status {
			c.State = pod.GetName()
			return OK()
		},
		RemovePod: func(c *Cycle, pod *abiv1.PodSummary, n *NodeInfo) Status {
			if pod.GetRequests().GetMilliCpu() > n.Free("cpu") {
				return Reject("fuzz: %s", pod.GetUid())
			}
			return OK()
		},
		SelectVictims: func(c *Cycle, n *NodeInfo, pods []*abiv1.PodSummary) ([]string, Status) {
			var out []string
			for _, p := range pods {
				if p.GetPriority() < c.Pod.Priority() {
					out = append(out, p.GetUid())
				}
			}
			return out, OK()
		},
	}
}

// readContext reads the cluster objects and tenant usage through every
// view.
func readContext(c *Cycle) {
	for _, s := range c.ResourceSlices() {
		_, _, _ = s.Driver(), s.Pool(), s.AllNodes()
		for _, d := range s.Devices() {
			_, _ = d.Attribute("model").String()
			_, _ = d.Capacity("memory", ResourceMemory)
		}
	}
	if ns := c.Namespace(c.Pod.Namespace()); ns != nil {
		_, _ = ns.Label("tenant")
		_ = ns.Object().Get("spec", "hard").Resources()
	}
	c.EachTenant("", func(_ string, used *abiv1.Resources) bool {
		_ = Quantity(used, ResourceCPU)
		return true
	})
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
	changed := marshal(f, &abiv1.FilterRequest{NodeHandle: 3, Changes: []*abiv1.PodChange{
		{Removed: true, Pod: &abiv1.PodSummary{Name: "v", Uid: "uv", Requests: &abiv1.Resources{MilliCpu: 100}}}, {Pod: &abiv1.PodSummary{Name: "n"}}}})
	victims := marshal(f, &abiv1.VictimsRequest{NodeHandle: 0, Pods: []*abiv1.PodSummary{{Name: "v", Uid: "uv", Priority: -1}, {Name: "w", Uid: "uw", Priority: 5}}})
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
		{uint32(abiv1.Point_POINT_FILTER), changed},
		{uint32(abiv1.Point_POINT_SELECT_VICTIMS), victims},
		{99, nil},
	} {
		f.Add(initReq, syncReq, cycleReq, tc.req, tc.point, uint32(3))
	}
	usageReq := marshal(f, &abiv1.NodeSync{Upserts: []*abiv1.NodeInfo{node(0, "a")}, Usage: []*abiv1.NodeUsage{
		{Handle: 0, Generation: 8, PodCount: 2, Requested: &abiv1.Resources{MilliCpu: 300, Pods: 2, Scalars: []*abiv1.Scalar{{Name: "nvidia.com/gpu", Value: 1}, {Name: "example.com/new", Value: 1}}}},
	}})
	f.Add(initReq, usageReq, cycleReq, scores, uint32(abiv1.Point_POINT_NORMALIZE_SCORE), uint32(0))
	// A host that reads the cycle's flags.
	flagsInit := marshal(f, &abiv1.InitRequest{HostAbiVersion: ABIVersion, PolicyName: "fuzz", Settings: []byte(`{"resource": "x"}`), CycleFlags: true})
	f.Add(flagsInit, syncReq, cycleReq, scores, uint32(abiv1.Point_POINT_NORMALIZE_SCORE), uint32(0))
	usageUnknown := marshal(f, &abiv1.NodeSync{Usage: []*abiv1.NodeUsage{{Handle: 9, Generation: 2}}})
	f.Add(initReq, usageUnknown, cycleReq, scores, uint32(abiv1.Point_POINT_NORMALIZE_SCORE), uint32(9))
	objects := marshal(f, &abiv1.NodeSync{Upserts: []*abiv1.NodeInfo{node(0, "a")},
		ObjectsReset: []int32{1},
		Objects: []*abiv1.ContextObject{{Kind: 0, Name: "d", Labels: []*abiv1.KeyValue{kv("tenant", "t")}, Json: []byte(`{"spec":{"hard":{"cpu":"2","x":"1Ki"}}}`)},
			{Kind: 1, Name: "s", Json: []byte(`{"spec":{"driver":"g","devices":[{"name":"0","attributes":{"model":{"string":"a\u0030"}},"capacity":{"g/memory":{"value":"1Gi"}}}]}}`)}},
		ObjectsRemoved: []*abiv1.ObjectRef{{Kind: 0, Name: "x"}},
		TenantUsage:    []*abiv1.TenantUsage{{Tenant: "d", Requested: &abiv1.Resources{MilliCpu: 5, Pods: 1}}, {Tenant: "e"}}})
	f.Add(initReq, objects, cycleReq, scores, uint32(abiv1.Point_POINT_NORMALIZE_SCORE), uint32(0))
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
		for _, n := range inst.nodes {
			if n != nil {
				checkIndex(t, n)
			}
		}
		answer := inst.startCycle(send(cycleB, 0))
		const known = uint32(abiv1.CycleFlag_CYCLE_FLAG_SCORES_FINAL | abiv1.CycleFlag_CYCLE_FLAG_NO_DETAIL)
		if flags := answer &^ 0xff; flags&^known != 0 || (flags != 0 && !inst.cycleFlags) {
			t.Fatalf("cycle: answered flags %#x (host reads flags: %v)", flags, inst.cycleFlags)
		}
		expectCode(t, "cycle", answer&0xff)
		r := expectResult(t, "cycle")
		if answer&uint32(abiv1.CycleFlag_CYCLE_FLAG_NO_DETAIL) != 0 && (len(r.Reasons) > 0 || r.NodeSubset) {
			t.Fatalf("cycle: flagged no detail, but the Result holds %+v", r)
		}
		expectCode(t, "filter", uint32(inst.filter(handle)>>32))
		expectResult(t, "filter")
		expectCode(t, "score", uint32(inst.score(handle)>>32))
		expectResult(t, "score")
		// score_nodes reads callB as handles; the length claimed may
		// exceed the buffer.
		n := send(callB, point) / 4
		code2, bad := inst.scoreNodes(n, true)
		expectCode(t, "score_nodes", uint32(code2))
		expectResult(t, "score_nodes")
		switch {
		case code2 == Success && len(inst.scores) != 8*int(n):
			t.Fatalf("score_nodes: %d bytes of scores for %d nodes", len(inst.scores), n)
		case code2 != Success && bad > n:
			t.Fatalf("score_nodes: failure at node %d of %d", bad, n)
		}
		// normalize_scores reads callB as handles, then raw scores.
		n = send(callB, point) / 12
		code2, bad = inst.normalizeScores(n)
		expectCode(t, "normalize_scores", uint32(code2))
		expectResult(t, "normalize_scores")
		switch {
		case code2 == Success && len(inst.scores) != 8*int(n):
			t.Fatalf("normalize_scores: %d bytes of scores for %d nodes", len(inst.scores), n)
		case code2 != Success && bad > n:
			t.Fatalf("normalize_scores: failure at node %d of %d", bad, n)
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

func expectResult(t *testing.T, call string) *abiv1.Result {
	t.Helper()
	var r abiv1.Result
	if err := r.UnmarshalVT(inst.marshalResult()); err != nil {
		t.Fatalf("%s: undecodable Result: %v", call, err)
	}
	return &r
}

// checkIndex checks that a synced node's index answers what reading its
// message does, for every resource and label it has and for absent ones.
// Names listed twice (never sent by the host) are skipped: which copy wins
// is not specified.
func checkIndex(t *testing.T, n *NodeInfo) {
	t.Helper()
	msg := n.Message()
	raw := &NodeInfo{msg: msg}
	if n.Name() != raw.Name() || n.Generation() != raw.Generation() || n.PodCount() != raw.PodCount() {
		t.Fatalf("node %q: name, generation, pod count %q %d %d from the index, %q %d %d from the message",
			n.Name(), n.Name(), n.Generation(), n.PodCount(), raw.Name(), raw.Generation(), raw.PodCount())
	}
	count := map[string]int{}
	for _, r := range []*abiv1.Resources{msg.GetNode().GetAllocatable(), msg.GetRequested()} {
		seen := map[string]bool{}
		for _, s := range r.GetScalars() {
			if !seen[s.GetName()] {
				seen[s.GetName()] = true
			} else {
				count[s.GetName()] = 2 // listed twice in one list
			}
		}
	}
	names := []string{ResourceCPU, ResourceMemory, ResourceEphemeralStorage, ResourcePods, "absent.example/x", ""}
	for _, r := range []*abiv1.Resources{msg.GetNode().GetAllocatable(), msg.GetRequested()} {
		for _, s := range r.GetScalars() {
			names = append(names, s.GetName())
		}
	}
	for _, name := range names {
		if count[name] > 1 || !n.index.built {
			continue
		}
		if got, want := n.Allocatable(name), raw.Allocatable(name); got != want {
			t.Fatalf("node %q: Allocatable(%q) = %d from the index, %d from the message", n.Name(), name, got, want)
		}
		if got, want := n.Requested(name), raw.Requested(name); got != want {
			t.Fatalf("node %q: Requested(%q) = %d from the index, %d from the message", n.Name(), name, got, want)
		}
		if got, want := n.Free(name), raw.Free(name); got != want {
			t.Fatalf("node %q: Free(%q) = %d from the index, %d from the message", n.Name(), name, got, want)
		}
	}
	keys := map[string]int{}
	for _, kv := range msg.GetNode().GetLabels() {
		keys[kv.GetKey()]++
	}
	keys["absent.example/key"] += 0
	for key, c := range keys {
		if c > 1 {
			continue
		}
		gv, gok := n.Label(key)
		wv, wok := raw.Label(key)
		if gv != wv || gok != wok {
			t.Fatalf("node %q: Label(%q) = %q, %v from the index, %q, %v from the message", n.Name(), key, gv, gok, wv, wok)
		}
	}
}

// TestNodeIndex checks the index of a node against its message: a scalar
// only requested, labels out of order, absent names; and that a synced
// node keeps its encoding rather than its decoded message (which the
// garbage collector would have to mark), decoding it on demand as sent.
func TestNodeIndex(t *testing.T) {
	inst = &instance{policy: &Policy{Name: "t"}}
	defer func() { inst = &instance{} }()
	kv := func(k, v string) *abiv1.KeyValue { return &abiv1.KeyValue{Key: k, Value: v} }
	msg := &abiv1.NodeInfo{Handle: 0, Generation: 1,
		Node: &abiv1.Node{Name: "n", Labels: []*abiv1.KeyValue{kv("zone", "b"), kv("a", "1"), kv(LabelZone, "eu-1a")},
			Allocatable: &abiv1.Resources{MilliCpu: 4000, Memory: 8 << 30, EphemeralStorage: 100, Pods: 110,
				Scalars: []*abiv1.Scalar{{Name: "nvidia.com/gpu", Value: 8}, {Name: "example.com/dongle", Value: 2}}}},
		Requested: &abiv1.Resources{MilliCpu: 1500, Memory: 1 << 30, Pods: 3,
			Scalars: []*abiv1.Scalar{{Name: "hugepages-2Mi", Value: 4 << 20}, {Name: "nvidia.com/gpu", Value: 3}}}}
	n := NewNodeInfo(msg)
	checkIndex(t, n)
	for _, c := range []struct {
		name       string
		alloc, req int64
	}{
		{ResourceCPU, 4000, 1500}, {ResourceMemory, 8 << 30, 1 << 30}, {ResourceEphemeralStorage, 100, 0}, {ResourcePods, 110, 3},
		{"nvidia.com/gpu", 8, 3}, {"example.com/dongle", 2, 0}, {"hugepages-2Mi", 0, 4 << 20}, {"absent", 0, 0},
	} {
		if a, r := n.Allocatable(c.name), n.Requested(c.name); a != c.alloc || r != c.req {
			t.Errorf("%s: allocatable %d, requested %d; want %d, %d", c.name, a, r, c.alloc, c.req)
		}
	}
	if v, ok := n.Label("zone"); !ok || v != "b" {
		t.Errorf(`Label("zone") = %q, %v`, v, ok)
	}
	if n.Zone() != "eu-1a" {
		t.Errorf("Zone() = %q", n.Zone())
	}
	if _, ok := n.Label("b"); ok {
		t.Error(`Label("b") found a label that is not there`)
	}

	b := marshal(t, &abiv1.NodeSync{Upserts: []*abiv1.NodeInfo{msg}})
	copy(inst.buffer(uint32(len(b))), b)
	if code := inst.sync(uint32(len(b))); code != uint32(Success) {
		t.Fatalf("sync answered %d: %v", code, inst.result.Reasons)
	}
	s := inst.node(0)
	if s.msg != nil {
		t.Error("a synced node kept its decoded message")
	}
	checkIndex(t, s)
	if got, want := marshal(t, s.Message()), marshal(t, msg); !bytes.Equal(got, want) {
		t.Errorf("Message() of a synced node differs from the message sent:\n%v\n%v", s.Message(), msg)
	}

	// A policy that wants pods or all nodes keeps the decoded message, and
	// no encoding beside it.
	inst.keepMessages = true
	copy(inst.buffer(uint32(len(b))), b)
	if code := inst.sync(uint32(len(b))); code != uint32(Success) {
		t.Fatalf("sync answered %d: %v", code, inst.result.Reasons)
	}
	if k := inst.node(0); k.msg == nil || k.raw != nil {
		t.Errorf("keeping messages, a synced node has message %v and %d bytes of encoding", k.msg != nil, len(k.raw))
	} else {
		checkIndex(t, k)
	}
}

// TestUsageUpdate applies a NodeUsage to a synced node: the new view has the
// new generation, requested amounts and pod count and the node's labels and
// allocatable amounts; the old view, which a policy may hold, is unchanged;
// a usage update for a node never synced fails the sync, naming the handle.
func TestUsageUpdate(t *testing.T) {
	inst = &instance{policy: &Policy{Name: "t"}}
	defer func() { inst = &instance{} }()
	kv := func(k, v string) *abiv1.KeyValue { return &abiv1.KeyValue{Key: k, Value: v} }
	whole := &abiv1.NodeSync{Upserts: []*abiv1.NodeInfo{{Handle: 2, Generation: 5, PodCount: 1,
		Node: &abiv1.Node{Name: "gpu-1", Labels: []*abiv1.KeyValue{kv(LabelZone, "eu-1a"), kv("gpu", "a100")},
			Allocatable: &abiv1.Resources{MilliCpu: 8000, Memory: 64 << 30, Pods: 110,
				Scalars: []*abiv1.Scalar{{Name: "example.com/dongle", Value: 1}, {Name: "nvidia.com/gpu", Value: 8}}}},
		Requested: &abiv1.Resources{MilliCpu: 1000, Pods: 1, Scalars: []*abiv1.Scalar{{Name: "nvidia.com/gpu", Value: 2}}}}}}
	sync := func(m *abiv1.NodeSync) uint32 {
		b := marshal(t, m)
		copy(inst.buffer(uint32(len(b))), b)
		return inst.sync(uint32(len(b)))
	}
	if code := sync(whole); code != uint32(Success) {
		t.Fatalf("whole sync answered %d", code)
	}
	old := inst.node(2)
	usage := &abiv1.NodeSync{Usage: []*abiv1.NodeUsage{{Handle: 2, Generation: 6, PodCount: 3,
		Requested: &abiv1.Resources{MilliCpu: 2500, Memory: 1 << 30, Pods: 3,
			Scalars: []*abiv1.Scalar{{Name: "hugepages-2Mi", Value: 2 << 20}, {Name: "nvidia.com/gpu", Value: 5}}}}}}
	if code := sync(usage); code != uint32(Success) {
		t.Fatalf("usage sync answered %d: %v", code, inst.result.Reasons)
	}
	n := inst.node(2)
	checkIndex(t, n)
	if n.Generation() != 6 || n.PodCount() != 3 || n.Name() != "gpu-1" || n.Zone() != "eu-1a" {
		t.Errorf("after the usage update: generation %d, pod count %d, name %q, zone %q", n.Generation(), n.PodCount(), n.Name(), n.Zone())
	}
	for _, c := range []struct {
		name            string
		alloc, req      int64
		oldAlloc, oldRq int64
	}{
		{ResourceCPU, 8000, 2500, 8000, 1000}, {ResourceMemory, 64 << 30, 1 << 30, 64 << 30, 0}, {ResourcePods, 110, 3, 110, 1},
		{"nvidia.com/gpu", 8, 5, 8, 2}, {"example.com/dongle", 1, 0, 1, 0}, {"hugepages-2Mi", 0, 2 << 20, 0, 0},
	} {
		if a, r := n.Allocatable(c.name), n.Requested(c.name); a != c.alloc || r != c.req {
			t.Errorf("%s after the update: allocatable %d, requested %d; want %d, %d", c.name, a, r, c.alloc, c.req)
		}
		if a, r := old.Allocatable(c.name), old.Requested(c.name); a != c.oldAlloc || r != c.oldRq {
			t.Errorf("%s in the view held from before: allocatable %d, requested %d; want %d, %d", c.name, a, r, c.oldAlloc, c.oldRq)
		}
	}
	if old.Generation() != 5 {
		t.Errorf("the view held from before changed generation to %d", old.Generation())
	}
	if m := n.Message(); m.GetGeneration() != 6 || m.GetPodCount() != 3 || m.GetRequested().GetMilliCpu() != 2500 ||
		m.GetNode().GetName() != "gpu-1" || len(m.GetNode().GetLabels()) != 2 {
		t.Errorf("Message() after the usage update: %v", m)
	}
	if m := old.Message(); m.GetGeneration() != 5 || m.GetRequested().GetMilliCpu() != 1000 {
		t.Errorf("Message() of the view held from before: %v", m)
	}
	code := sync(&abiv1.NodeSync{Usage: []*abiv1.NodeUsage{{Handle: 7, Generation: 1}}})
	if code != uint32(Error) || len(inst.result.Reasons) != 1 || inst.result.Reasons[0] != "usage update for node handle 7, which was never synced" {
		t.Errorf("usage update for an unknown node: code %d, reasons %q", code, inst.result.Reasons)
	}
}

// TestSameObject syncs a node, applies usage updates to it, sends it whole
// again and adds another, with and without the messages kept: the views of
// one node object answer true across usage updates and false once the
// node was resent, for another node and for nil.
func TestSameObject(t *testing.T) {
	defer func() { inst = &instance{} }()
	kv := func(k, v string) *abiv1.KeyValue { return &abiv1.KeyValue{Key: k, Value: v} }
	node := func(h int32, gen int64, clique string) *abiv1.NodeInfo {
		return &abiv1.NodeInfo{Handle: h, Generation: gen, Node: &abiv1.Node{Name: fmt.Sprintf("n%d", h),
			Labels: []*abiv1.KeyValue{kv("nvidia.com/gpu.clique", clique)}}, Requested: &abiv1.Resources{}}
	}
	usage := func(gen int64, pods int64) *abiv1.NodeSync {
		return &abiv1.NodeSync{Usage: []*abiv1.NodeUsage{{Handle: 1, Generation: gen, PodCount: int32(pods),
			Requested: &abiv1.Resources{Pods: pods}}}}
	}
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keepMessages=%v", keep), func(t *testing.T) {
			inst = &instance{policy: &Policy{Name: "t", WantsAllNodes: keep}}
			if code := inst.init(sendMsg(t, &abiv1.InitRequest{HostAbiVersion: ABIVersion})); code != uint32(Success) {
				t.Fatalf("init answered %d", code)
			}
			if inst.keepMessages != keep {
				t.Fatalf("keepMessages %v, want %v", inst.keepMessages, keep)
			}
			sync := func(m *abiv1.NodeSync) {
				t.Helper()
				if code := inst.sync(sendMsg(t, m)); code != uint32(Success) {
					t.Fatalf("sync answered %d: %v", code, inst.result.Reasons)
				}
			}
			sync(&abiv1.NodeSync{Upserts: []*abiv1.NodeInfo{node(1, 1, "a"), node(2, 1, "a")}})
			first, other := inst.node(1), inst.node(2)
			sync(usage(2, 1))
			sync(usage(3, 2))
			used := inst.node(1)
			if used == first || used.PodCount() != 2 {
				t.Fatalf("the usage update made no new view (pod count %d)", used.PodCount())
			}
			sync(&abiv1.NodeSync{Upserts: []*abiv1.NodeInfo{node(1, 4, "b")}})
			resent := inst.node(1)
			for _, c := range []struct {
				name string
				a, b *NodeInfo
				want bool
			}{
				{"a view and itself", first, first, true},
				{"before and after usage updates", first, used, true},
				{"after and before usage updates", used, first, true},
				{"before and after the node was resent", first, resent, false},
				{"after usage updates and after the node was resent", used, resent, false},
				{"two nodes", first, other, false},
				{"a view and nil", first, nil, false},
				{"nil and a view", nil, first, false},
			} {
				if got := c.a.SameObject(c.b); got != c.want {
					t.Errorf("SameObject of %s: %v, want %v", c.name, got, c.want)
				}
			}
			if v, _ := resent.Label("nvidia.com/gpu.clique"); v != "b" {
				t.Errorf("the resent node's clique is %q, want b", v)
			}
		})
	}
	m := node(3, 1, "c")
	if a, b := NewNodeInfo(m), NewNodeInfo(m); !a.SameObject(b) || a.SameObject(NewNodeInfo(node(3, 1, "c"))) {
		t.Errorf("views of one message: SameObject %v; of equal messages: %v; want true, false", a.SameObject(b), a.SameObject(NewNodeInfo(node(3, 1, "c"))))
	}
}
