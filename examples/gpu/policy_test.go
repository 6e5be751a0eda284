package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/guest"
	"github.com/wasmsched/wasmsched/guest/guesttest"
)

// These tests run the policy natively, on the messages the host would send
// (built by guesttest); the same rules are run through the wasm module in
// wasm_test.go.

// newPod is a pod requesting a CPU and n GPUs, with annotations.
func newPod(n int64, annotations map[string]string) *guest.Pod {
	return guesttest.MakePod().Namespace("research").Name("train").Annotations(annotations).
		Req(map[string]int64{guest.ResourceCPU: 1000, ResourceGPU: n}).Obj()
}

// newNode is a node with 8 CPUs and alloc GPUs, used of them requested, and
// labels.
func newNode(name string, alloc, used int64, labels map[string]string) *guest.NodeInfo {
	return guesttest.MakeNode().Name(name).Labels(labels).
		Allocatable(map[string]int64{guest.ResourceCPU: 8000, ResourceGPU: alloc}).
		Requested(map[string]int64{guest.ResourceCPU: 500, ResourceGPU: used}).Obj()
}

// gfd returns GPU Feature Discovery style labels.
func gfd(product, memory, sharing string) map[string]string {
	m := map[string]string{"nvidia.com/gpu.present": "true"}
	for k, v := range map[string]string{LabelProduct: product, LabelMemory: memory, LabelSharing: sharing} {
		if v != "" {
			m[k] = v
		}
	}
	return m
}

const (
	a100   = "NVIDIA-A100-SXM4-80GB"
	a10040 = "NVIDIA-A100-SXM4-40GB"
	h100   = "NVIDIA-H100-80GB-HBM3"
)

// mustLoad builds the policy from settings as the Settings hook does.
func mustLoad(t *testing.T, raw string) *Policy {
	t.Helper()
	return guesttest.Load(t, raw, DefaultSettings(), New)
}

func TestLoad(t *testing.T) {
	tests := []struct {
		raw     string
		want    Policy
		wantErr string
	}{
		{raw: "", want: Policy{strategy: Binpack, reserveGPUNodes: true}},
		{raw: " \n", want: Policy{strategy: Binpack, reserveGPUNodes: true}},
		{raw: "{}", want: Policy{strategy: Binpack, reserveGPUNodes: true}},
		{raw: `{"strategy": "spread"}`, want: Policy{strategy: Spread, reserveGPUNodes: true}},
		{raw: `{"strategy": "binpack", "reserveGPUNodes": false}`, want: Policy{strategy: Binpack}},
		{raw: `{"strategy": "Spread"}`, wantErr: `settings: "strategy" must be "binpack" or "spread", not "Spread"`},
		{raw: `{"strategy": ""}`, wantErr: `"strategy" must be "binpack" or "spread", not ""`},
		{raw: `{"stratgy": "spread"}`, wantErr: `unknown field "stratgy"`},
		{raw: `{"reserveGPUNodes": "yes"}`, wantErr: "cannot unmarshal string"},
		{raw: `[]`, wantErr: "settings:"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			p, err := guest.Load([]byte(tt.raw), DefaultSettings(), New)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load(%s) = %v, want an error containing %q", tt.raw, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load(%s): %v", tt.raw, err)
			}
			if *p != tt.want {
				t.Errorf("Load(%s) = %+v, want %+v", tt.raw, *p, tt.want)
			}
		})
	}
}

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name        string
		gpus        int64
		annotations map[string]string
		wantGPUs    int64
		products    []string
		minMemory   int64
		allowShared bool
		invalid     guest.Status
	}{
		{name: "no gpu", gpus: 0},
		{name: "no gpu ignores annotations", gpus: 0, annotations: map[string]string{AnnotationMinMemory: "lots"}},
		{name: "plain", gpus: 2, wantGPUs: 2},
		{name: "one product", gpus: 1, wantGPUs: 1, annotations: map[string]string{AnnotationProduct: a100}, products: []string{a100}},
		{name: "products trimmed", gpus: 1, wantGPUs: 1,
			annotations: map[string]string{AnnotationProduct: " " + a100 + " ,, " + h100 + ","}, products: []string{a100, h100}},
		{name: "min memory", gpus: 1, wantGPUs: 1, annotations: map[string]string{AnnotationMinMemory: "40960"}, minMemory: 40960},
		{name: "allow shared", gpus: 1, wantGPUs: 1, annotations: map[string]string{AnnotationAllowShared: "true"}, allowShared: true},
		{name: "deny shared", gpus: 1, wantGPUs: 1, annotations: map[string]string{AnnotationAllowShared: "false"}},
		{name: "empty products", gpus: 1, wantGPUs: 1, annotations: map[string]string{AnnotationProduct: " , "},
			invalid: guest.RejectUnresolvable(`gpu: bad annotation gpu.wasmsched.io/product: " , " lists no product`)},
		{name: "memory with unit", gpus: 1, wantGPUs: 1, annotations: map[string]string{AnnotationMinMemory: "40Gi"},
			invalid: guest.RejectUnresolvable(`gpu: bad annotation gpu.wasmsched.io/min-memory-mib: "40Gi" is not a positive whole number of MiB`)},
		{name: "memory zero", gpus: 1, wantGPUs: 1, annotations: map[string]string{AnnotationMinMemory: "0"},
			invalid: guest.RejectUnresolvable(`gpu: bad annotation gpu.wasmsched.io/min-memory-mib: "0" is not a positive whole number of MiB`)},
		{name: "memory negative", gpus: 1, wantGPUs: 1, annotations: map[string]string{AnnotationMinMemory: "-1"},
			invalid: guest.RejectUnresolvable(`gpu: bad annotation gpu.wasmsched.io/min-memory-mib: "-1" is not a positive whole number of MiB`)},
		{name: "memory out of range", gpus: 1, wantGPUs: 1, annotations: map[string]string{AnnotationMinMemory: "92233720368547758090"},
			invalid: guest.RejectUnresolvable(`gpu: bad annotation gpu.wasmsched.io/min-memory-mib: "92233720368547758090" is not a positive whole number of MiB`)},
		{name: "memory with sign", gpus: 1, wantGPUs: 1, annotations: map[string]string{AnnotationMinMemory: "+40960"},
			invalid: guest.RejectUnresolvable(`gpu: bad annotation gpu.wasmsched.io/min-memory-mib: "+40960" is not a positive whole number of MiB`)},
		{name: "shared yes", gpus: 1, wantGPUs: 1, annotations: map[string]string{AnnotationAllowShared: "yes"},
			invalid: guest.RejectUnresolvable(`gpu: bad annotation gpu.wasmsched.io/allow-shared: "yes" is not "true" or "false"`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := parseRequest(newPod(tt.gpus, tt.annotations))
			if r.gpus != tt.wantGPUs || !slices.Equal(r.products, tt.products) || r.minMemoryMiB != tt.minMemory || r.allowShared != tt.allowShared {
				t.Errorf("got gpus %d products %q minMemory %d allowShared %v, want %d %q %d %v",
					r.gpus, r.products, r.minMemoryMiB, r.allowShared, tt.wantGPUs, tt.products, tt.minMemory, tt.allowShared)
			}
			guesttest.CheckStatus(t, r.invalid, tt.invalid)
		})
	}
}

func TestPreFilter(t *testing.T) {
	p := mustLoad(t, "")
	tests := []struct {
		name        string
		gpus        int64
		annotations map[string]string
		want        guest.Status
	}{
		{name: "gpu pod", gpus: 1, annotations: map[string]string{AnnotationProduct: a100}, want: guest.OK()},
		{name: "no gpu skips Filter", gpus: 0, want: guest.SkipPoint()},
		{name: "malformed", gpus: 1, annotations: map[string]string{AnnotationMinMemory: "big"},
			want: guest.RejectUnresolvable(`gpu: bad annotation gpu.wasmsched.io/min-memory-mib: "big" is not a positive whole number of MiB`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &guest.Cycle{Pod: newPod(tt.gpus, tt.annotations)}
			guesttest.CheckStatus(t, p.PreFilter(c), tt.want)
			if r, ok := c.State.(*request); !ok || r.gpus != tt.gpus {
				t.Errorf("PreFilter left State %#v, want the parsed request", c.State)
			}
		})
	}
}

func TestFilter(t *testing.T) {
	p := mustLoad(t, "")
	a100Node := gfd(a100, "81920", "none")
	tests := []struct {
		name        string
		gpus        int64
		annotations map[string]string
		node        *guest.NodeInfo
		want        guest.Status
	}{
		{name: "fits", gpus: 2, node: newNode("n", 8, 6, a100Node), want: guest.OK()},
		{name: "no gpu pod passes a cpu node", gpus: 0, node: newNode("n", 0, 0, nil), want: guest.OK()},
		{name: "no gpu pod passes a full gpu node", gpus: 0, node: newNode("n", 8, 8, a100Node), want: guest.OK()},
		{name: "short of free gpus", gpus: 2, node: newNode("n", 8, 7, a100Node),
			want: guest.Reject("gpu: insufficient free nvidia.com/gpu: need 2, free 1")},
		{name: "overcommitted node shows free 0", gpus: 1, node: newNode("n", 4, 6, a100Node),
			want: guest.Reject("gpu: insufficient free nvidia.com/gpu: need 1, free 0")},
		{name: "cpu node", gpus: 1, node: newNode("n", 0, 0, nil),
			want: guest.RejectUnresolvable("gpu: insufficient free nvidia.com/gpu: need 1, free 0")},
		{name: "node smaller than the request", gpus: 8, node: newNode("n", 4, 0, a100Node),
			want: guest.RejectUnresolvable("gpu: insufficient free nvidia.com/gpu: need 8, free 4")},
		{name: "wanted product", gpus: 1, annotations: map[string]string{AnnotationProduct: h100 + "," + a100},
			node: newNode("n", 8, 0, a100Node), want: guest.OK()},
		{name: "wrong product", gpus: 1, annotations: map[string]string{AnnotationProduct: a100 + ", " + h100},
			node: newNode("n", 4, 0, gfd(a10040, "40960", "none")),
			want: guest.RejectUnresolvable("gpu: wrong GPU product: want one of [NVIDIA-A100-SXM4-80GB, NVIDIA-H100-80GB-HBM3], node has NVIDIA-A100-SXM4-40GB")},
		{name: "wrong product, one wanted", gpus: 1, annotations: map[string]string{AnnotationProduct: h100},
			node: newNode("n", 8, 0, a100Node),
			want: guest.RejectUnresolvable("gpu: wrong GPU product: want NVIDIA-H100-80GB-HBM3, node has NVIDIA-A100-SXM4-80GB")},
		{name: "no product label", gpus: 1, annotations: map[string]string{AnnotationProduct: h100},
			node: newNode("n", 8, 0, gfd("", "81920", "")),
			want: guest.RejectUnresolvable("gpu: wrong GPU product: want NVIDIA-H100-80GB-HBM3, node has no nvidia.com/gpu.product label")},
		{name: "shared product matches its base name", gpus: 1,
			annotations: map[string]string{AnnotationProduct: "Tesla-T4", AnnotationAllowShared: "true"},
			node:        newNode("n", 4, 1, gfd("Tesla-T4-SHARED", "15360", "time-slicing")), want: guest.OK()},
		{name: "shared product matches itself", gpus: 1,
			annotations: map[string]string{AnnotationProduct: "Tesla-T4-SHARED", AnnotationAllowShared: "true"},
			node:        newNode("n", 4, 1, gfd("Tesla-T4-SHARED", "15360", "time-slicing")), want: guest.OK()},
		{name: "base product does not match another's shared name", gpus: 1,
			annotations: map[string]string{AnnotationProduct: "Tesla-T4-SHARED"},
			node:        newNode("n", 4, 0, gfd("Tesla-T4", "15360", "none")),
			want:        guest.RejectUnresolvable("gpu: wrong GPU product: want Tesla-T4-SHARED, node has Tesla-T4")},
		{name: "enough memory", gpus: 1, annotations: map[string]string{AnnotationMinMemory: "81920"},
			node: newNode("n", 8, 0, a100Node), want: guest.OK()},
		{name: "too little memory", gpus: 1, annotations: map[string]string{AnnotationMinMemory: "40961"},
			node: newNode("n", 4, 0, gfd(a10040, "40960", "none")),
			want: guest.RejectUnresolvable("gpu: insufficient GPU memory: need 40961 MiB, node has 40960 MiB")},
		{name: "no memory label", gpus: 1, annotations: map[string]string{AnnotationMinMemory: "1024"},
			node: newNode("n", 1, 0, gfd(a100, "", "")),
			want: guest.RejectUnresolvable("gpu: insufficient GPU memory: need 1024 MiB, node has no nvidia.com/gpu.memory label")},
		{name: "unreadable memory label", gpus: 1, annotations: map[string]string{AnnotationMinMemory: "1024"},
			node: newNode("n", 1, 0, gfd(a100, "80Gi", "")),
			want: guest.RejectUnresolvable(`gpu: unreadable GPU memory: node label nvidia.com/gpu.memory is "80Gi", not a whole number of MiB`)},
		{name: "memory label out of range", gpus: 1, annotations: map[string]string{AnnotationMinMemory: "1024"},
			node: newNode("n", 1, 0, gfd(a100, "92233720368547758090", "")),
			want: guest.RejectUnresolvable(`gpu: unreadable GPU memory: node label nvidia.com/gpu.memory is "92233720368547758090", not a whole number of MiB`)},
		{name: "memory label ignored without the annotation", gpus: 1,
			node: newNode("n", 1, 0, gfd(a100, "80Gi", "")), want: guest.OK()},
		{name: "shared node refused", gpus: 1, node: newNode("n", 4, 0, gfd("Tesla-T4-SHARED", "15360", "time-slicing")),
			want: guest.RejectUnresolvable(`gpu: shared GPUs not allowed: node has nvidia.com/gpu.sharing-strategy=time-slicing, pod lacks annotation gpu.wasmsched.io/allow-shared: "true"`)},
		{name: "shared node refused with allow-shared false", gpus: 1, annotations: map[string]string{AnnotationAllowShared: "false"},
			node: newNode("n", 4, 0, gfd("NVIDIA-A100-SXM4-40GB", "40960", "mps")),
			want: guest.RejectUnresolvable(`gpu: shared GPUs not allowed: node has nvidia.com/gpu.sharing-strategy=mps, pod lacks annotation gpu.wasmsched.io/allow-shared: "true"`)},
		{name: "shared node allowed", gpus: 1, annotations: map[string]string{AnnotationAllowShared: "true"},
			node: newNode("n", 4, 0, gfd("Tesla-T4-SHARED", "15360", "time-slicing")), want: guest.OK()},
		{name: "sharing none", gpus: 1, node: newNode("n", 4, 0, gfd("", "", "none")), want: guest.OK()},
		{name: "no sharing label", gpus: 1, node: newNode("n", 4, 0, nil), want: guest.OK()},
		{name: "unresolvable rules before the free count", gpus: 2, annotations: map[string]string{AnnotationProduct: h100},
			node: newNode("n", 8, 7, a100Node),
			want: guest.RejectUnresolvable("gpu: wrong GPU product: want NVIDIA-H100-80GB-HBM3, node has NVIDIA-A100-SXM4-80GB")},
		{name: "malformed annotation", gpus: 1, annotations: map[string]string{AnnotationAllowShared: "TRUE"},
			node: newNode("n", 8, 0, a100Node),
			want: guest.RejectUnresolvable(`gpu: bad annotation gpu.wasmsched.io/allow-shared: "TRUE" is not "true" or "false"`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &guest.Cycle{Pod: newPod(tt.gpus, tt.annotations)}
			p.PreFilter(c)
			guesttest.CheckStatus(t, p.Filter(c, tt.node), tt.want)
			// Without PreFilter (a cycle begun on another instance) the
			// verdict is the same.
			guesttest.CheckStatus(t, p.Filter(&guest.Cycle{Pod: c.Pod}, tt.node), tt.want)
		})
	}
}

// TestFilterMemoises checks that alike nodes share one rejection and that
// different ones get their own.
func TestFilterMemoises(t *testing.T) {
	p := mustLoad(t, "")
	c := &guest.Cycle{Pod: newPod(2, map[string]string{AnnotationProduct: h100})}
	p.PreFilter(c)
	a := p.Filter(c, newNode("a", 8, 0, gfd(a100, "", "")))
	b := p.Filter(c, newNode("b", 8, 0, gfd(a100, "", "")))
	if &a.Reasons[0] != &b.Reasons[0] {
		t.Errorf("alike nodes got separately built reasons")
	}
	other := p.Filter(c, newNode("c", 8, 0, gfd(a10040, "", "")))
	if !strings.HasSuffix(other.Reasons[0], "node has "+a10040) {
		t.Errorf("a different product got reason %q", other.Reasons[0])
	}
	again := p.Filter(c, newNode("d", 8, 0, gfd(a100, "", "")))
	if !strings.HasSuffix(again.Reasons[0], "node has "+a100) {
		t.Errorf("returning to the first product got reason %q", again.Reasons[0])
	}

	c = &guest.Cycle{Pod: newPod(3, nil)}
	p.PreFilter(c)
	for free := int64(0); free < 3; free++ {
		for range 2 {
			s := p.Filter(c, newNode("n", 8, 8-free, nil))
			guesttest.CheckStatus(t, s, guest.Reject("gpu: insufficient free nvidia.com/gpu: need 3, free %d", free))
		}
	}
}

// TestFilterDoesNotAllocate holds the hot path to its promise: a node that
// passes, and a node rejected for a reason already seen, cost no allocation.
func TestFilterDoesNotAllocate(t *testing.T) {
	p := mustLoad(t, "")
	c := &guest.Cycle{Pod: newPod(2, map[string]string{
		AnnotationProduct: a100 + "," + h100, AnnotationMinMemory: "40960", AnnotationAllowShared: "true",
	})}
	p.PreFilter(c)
	nodes := map[string]*guest.NodeInfo{
		"passes":        newNode("a", 8, 2, gfd(a100, "81920", "time-slicing")),
		"short":         newNode("b", 8, 7, gfd(a100, "81920", "none")),
		"cpu":           newNode("c", 0, 0, nil),
		"wrong product": newNode("d", 4, 0, gfd(a10040, "40960", "none")),
		"no product":    newNode("e", 4, 0, gfd("", "40960", "none")),
		"small memory":  newNode("f", 4, 0, gfd(h100, "40000", "none")),
	}
	for name, n := range nodes {
		p.Filter(c, n) // build the reason once
		if allocs := testing.AllocsPerRun(100, func() { p.Filter(c, n) }); allocs != 0 {
			t.Errorf("Filter on node %q: %v allocations per call, want 0", name, allocs)
		}
	}
	n := nodes["passes"]
	if allocs := testing.AllocsPerRun(100, func() { p.Score(c, n) }); allocs != 0 {
		t.Errorf("Score: %v allocations per call, want 0", allocs)
	}
}

func TestScore(t *testing.T) {
	type scored struct {
		node *guest.NodeInfo
		want int64
	}
	tests := []struct {
		name     string
		settings string
		gpus     int64
		nodes    []scored
	}{
		{name: "binpack prefers the tightest fit", settings: "", gpus: 2, nodes: []scored{
			{newNode("left-0", 8, 6, nil), 100},
			{newNode("left-3", 8, 3, nil), 50},
			{newNode("left-6", 8, 0, nil), 0},
		}},
		{name: "binpack counts GPUs, not fractions", settings: `{"strategy": "binpack"}`, gpus: 1, nodes: []scored{
			{newNode("4-of-4-used-after", 4, 3, nil), 100},
			{newNode("7-of-8-used-after", 8, 6, nil), 0},
		}},
		{name: "spread prefers the emptiest", settings: `{"strategy": "spread"}`, gpus: 2, nodes: []scored{
			{newNode("left-0", 8, 6, nil), 0},
			{newNode("left-3", 8, 3, nil), 50},
			{newNode("left-6", 8, 0, nil), 100},
		}},
		{name: "equal nodes all score 100", settings: `{"strategy": "spread"}`, gpus: 1, nodes: []scored{
			{newNode("a", 4, 1, nil), 100},
			{newNode("b", 4, 1, nil), 100},
		}},
		{name: "one node scores 100", gpus: 1, nodes: []scored{{newNode("a", 8, 0, nil), 100}}},
		{name: "no gpu pod avoids gpu nodes", settings: "", gpus: 0, nodes: []scored{
			{newNode("gpu", 8, 0, gfd(a100, "81920", "none")), 0},
			{newNode("full-gpu", 8, 8, nil), 0},
			{newNode("cpu", 0, 0, nil), 100},
			{newNode("labels-only", 0, 0, gfd(a100, "81920", "none")), 100},
		}},
		{name: "no gpu pod indifferent without reserveGPUNodes", settings: `{"reserveGPUNodes": false}`, gpus: 0, nodes: []scored{
			{newNode("gpu", 8, 0, nil), 0},
			{newNode("cpu", 0, 0, nil), 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustLoad(t, tt.settings)
			c := &guest.Cycle{Pod: newPod(tt.gpus, nil)}
			p.PreFilter(c)
			scores := make([]guest.NodeScore, len(tt.nodes))
			for i, sc := range tt.nodes {
				v, s := p.Score(c, sc.node)
				guesttest.CheckStatus(t, s, guest.OK())
				scores[i] = guest.NodeScore{Node: sc.node, Score: v}
			}
			guesttest.CheckStatus(t, p.NormalizeScore(c, scores), guest.OK())
			for i, sc := range tt.nodes {
				if scores[i].Score != sc.want {
					t.Errorf("node %s: score %d, want %d", sc.node.Name(), scores[i].Score, sc.want)
				}
			}
		})
	}
}

func TestScoreRawIsFreeAfterPlacement(t *testing.T) {
	p := mustLoad(t, "")
	c := &guest.Cycle{Pod: newPod(3, nil)}
	p.PreFilter(c)
	if v, _ := p.Score(c, newNode("n", 8, 2, nil)); v != 3 {
		t.Errorf("raw score %d, want 3 GPUs left free", v)
	}
	guesttest.CheckStatus(t, p.NormalizeScore(c, nil), guest.OK())
}

func TestParseMiB(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"81920", 81920, true},
		{"007", 7, true},
		{"9223372036854775807", 1<<63 - 1, true},
		{"9223372036854775808", 0, false},
		{"92233720368547758090", 0, false},
		{"", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{" 1", 0, false},
		{"1.5", 0, false},
		{"80Gi", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseMiB(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseMiB(%q) = %d, %v, want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
