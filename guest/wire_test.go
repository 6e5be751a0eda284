package guest

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// indexed is what a node's index tells, in strings: two indexes of the same
// node agree on it whatever text their spans point into.
type indexed struct {
	Built             bool
	Name              string
	Generation        int64
	PodCount          int32
	Alloc, Req        [4]int64
	Scalars, Labels   []string
	Handle            int32
	HasRaw, HasDecode bool
}

func contents(n *NodeInfo) indexed {
	x := &n.index
	out := indexed{Built: x.built, Name: x.str(x.name), Generation: x.generation, PodCount: x.podCount,
		Alloc: x.alloc, Req: x.req, Handle: n.handle, HasRaw: n.raw != nil, HasDecode: n.msg != nil}
	for _, s := range x.scalars {
		out.Scalars = append(out.Scalars, fmt.Sprintf("%s alloc %d req %d", x.str(s.name), s.alloc, s.req))
	}
	for _, l := range x.labels {
		out.Labels = append(out.Labels, x.str(l.key)+"="+x.str(l.value))
	}
	return out
}

// indexNodes are nodes of the shapes the host sends and some it does not:
// scalars requested and not allocatable, a name repeated, negative
// amounts, no node, no requested amounts, labels out of order.
func indexNodes() []*abiv1.NodeInfo {
	kv := func(k, v string) *abiv1.KeyValue { return &abiv1.KeyValue{Key: k, Value: v} }
	nodes := []*abiv1.NodeInfo{
		{},
		{Handle: 7, Generation: 3},
		{Handle: -1, Generation: -5, PodCount: -2, Node: &abiv1.Node{}},
		{Handle: 1, Node: &abiv1.Node{Name: "n1"}, Requested: &abiv1.Resources{MilliCpu: -1, Memory: 1 << 40}},
		{Handle: 2, Node: &abiv1.Node{Name: "n2", Labels: []*abiv1.KeyValue{kv("z", "1"), kv("a", ""), kv("", "empty key"), kv("m", "é")}}},
		{Handle: 3, Generation: 9, PodCount: 4, Node: &abiv1.Node{Name: "gpu",
			Labels:      []*abiv1.KeyValue{kv("nvidia.com/gpu.product", "A100")},
			Annotations: []*abiv1.KeyValue{kv("a", "b")},
			Taints:      []*abiv1.Taint{{Key: "gpu", Effect: "NoSchedule"}},
			Allocatable: &abiv1.Resources{MilliCpu: 8000, Memory: 32 << 30, EphemeralStorage: 100 << 30, Pods: 110,
				Scalars: []*abiv1.Scalar{{Name: "nvidia.com/gpu", Value: 8}, {Name: "example.com/fpga", Value: 2}, {Name: "example.com/fpga", Value: 3}}},
			Capacity:   &abiv1.Resources{MilliCpu: 9000},
			Conditions: []*abiv1.NodeCondition{{Type: "Ready", Status: "True"}}},
			Requested: &abiv1.Resources{MilliCpu: 2500, Pods: 4,
				Scalars: []*abiv1.Scalar{{Name: "nvidia.com/gpu", Value: 3}, {Name: "hugepages-2Mi", Value: 1 << 21}, {Name: "", Value: -1}}},
			Pods: []*abiv1.PodSummary{{Name: "p", Namespace: "ns"}}},
		{Handle: 4, Node: &abiv1.Node{Name: "req-only"}, Requested: &abiv1.Resources{Scalars: []*abiv1.Scalar{{Name: "b", Value: 1}, {Name: "a", Value: 2}}}},
	}
	for _, n := range residentNodes(20).Upserts {
		nodes = append(nodes, n)
	}
	return nodes
}

// A node indexed from its encoding has the index that decoding it first
// gives, and keeps the encoding, not a message.
func TestIndexNodeMatchesDecoded(t *testing.T) {
	for i, m := range indexNodes() {
		raw, err := m.MarshalVT()
		if err != nil {
			t.Fatal(err)
		}
		got, ok, err := indexNode(raw)
		if err != nil || !ok {
			t.Fatalf("node %d: indexNode = %v, %v", i, ok, err)
		}
		want := newNodeInfo(m, raw, false)
		if g, w := contents(got), contents(want); !reflect.DeepEqual(g, w) {
			t.Errorf("node %d: indexed from the encoding\n%+v\nwant (decoded first)\n%+v", i, g, w)
		}
		if got.Name() != m.GetNode().GetName() || got.Message().GetNode().GetName() != m.GetNode().GetName() {
			t.Errorf("node %d: Name %q, Message's %q, want %q", i, got.Name(), got.Message().GetNode().GetName(), m.GetNode().GetName())
		}
	}
}

// An encoding that protobuf reads in a way the index reader does not (a
// singular message sent twice is merged; a known field with another wire
// type) is left to the generated decoder; a malformed one is an error, in
// the reader and through the sync.
func TestIndexNodeLeavesOddShapes(t *testing.T) {
	one, _ := (&abiv1.NodeInfo{Handle: 1, Node: &abiv1.Node{Name: "a", Labels: []*abiv1.KeyValue{{Key: "x", Value: "1"}}}}).MarshalVT()
	two, _ := (&abiv1.NodeInfo{Node: &abiv1.Node{Allocatable: &abiv1.Resources{MilliCpu: 5}}}).MarshalVT()
	merged := append(append([]byte{}, one...), two...)
	if _, ok, err := indexNode(merged); ok || err != nil {
		t.Fatalf("node sent twice: indexNode = %v, %v; want it left to the decoder", ok, err)
	}
	wrongType := bytesField(nil, nodeInfoHandle, []byte("x"))
	if _, ok, _ := indexNode(wrongType); ok {
		t.Fatal("handle as bytes: indexNode took it")
	}
	for name, bad := range map[string][]byte{
		"truncated": one[:len(one)-1],
		"bad tag":   {0x80},
		"field 0":   {0x00, 0x01},
	} {
		if _, _, err := indexNode(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}

	// Through the sync: the merged node is the decoder's, the malformed
	// one fails the call naming the request.
	in := &instance{policy: &Policy{Name: "t"}, ready: true}
	req := bytesField(nil, 1, merged)
	copy(in.buffer(uint32(len(req))), req)
	if code := in.sync(uint32(len(req))); code != uint32(Success) {
		t.Fatalf("sync answered %d: %v", code, in.result.Reasons)
	}
	n := in.node(1)
	if n == nil || n.Name() != "a" || n.Allocatable("cpu") != 5 {
		t.Fatalf("merged node: %+v", n)
	}
	if v, _ := n.Label("x"); v != "1" {
		t.Fatalf("merged node's label x = %q", v)
	}
	req = bytesField(nil, 1, one[:len(one)-1])
	copy(in.buffer(uint32(len(req))), req)
	if code := in.sync(uint32(len(req))); code != uint32(Error) || len(in.result.Reasons) == 0 || in.result.Reasons[0][:17] != "decode NodeSync: " {
		t.Fatalf("malformed node: sync answered %d, %v", code, in.result.Reasons)
	}
}

// bytesField appends field num, length-delimited, with payload v.
func bytesField(b []byte, num int, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(num)<<3|wireBytes)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// FuzzIndexNode: whatever the bytes, the index reader does not panic, and
// where the generated decoder reads them and the reader does too, both
// give the same index.
func FuzzIndexNode(f *testing.F) {
	for _, m := range indexNodes()[:8] {
		raw, _ := m.MarshalVT()
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok, err := indexNode(raw)
		m := &abiv1.NodeInfo{}
		if m.UnmarshalVT(raw) != nil {
			return
		}
		if err != nil || !ok {
			return // the sync decodes it
		}
		if g, w := contents(got), contents(newNodeInfo(m, raw, false)); !reflect.DeepEqual(g, w) {
			t.Fatalf("indexed from the encoding\n%+v\nwant (decoded first)\n%+v", g, w)
		}
	})
}
