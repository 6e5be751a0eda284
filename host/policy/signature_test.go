package policy

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// annotated is mkPod with annotations and labels.
func annotated(name string, annotations, labels map[string]string) *v1.Pod {
	p := mkPod(name)
	p.Annotations, p.Labels = annotations, labels
	return p
}

// A policy that declares a signature is sent only what it declared: an
// annotation it reads but left out reads as absent, so it cannot judge two
// pods of equal signature differently.
func TestSignatureStripsUndeclared(t *testing.T) {
	nodes := []fwk.NodeInfo{mkNode("n1", nil)}
	pod := annotated("p", map[string]string{"need": "yes", "other": "x"}, map[string]string{"app": "a", "tier": "b"})

	// Without a declaration the policy sees the whole pod and cannot sign.
	p := load(t, `{"needAnnotation": "need"}`)
	if s, err := p.Filter(ctx, NewCycle(pod, nodes), nodes[0]); err != nil || !s.IsSuccess() {
		t.Fatalf("undeclared: %+v %v, want the pod's annotation seen", s, err)
	}
	if p.Signing() != Unsigned {
		t.Fatalf("Signing = %v, want Unsigned", p.Signing())
	}
	if _, ok, reason, err := p.Sign(ctx, pod); ok || err != nil || reason != "it declares no pod signature" {
		t.Fatalf("Sign = %v %q %v, want refused for lack of a declaration", ok, reason, err)
	}

	// Declared without the annotation: the policy never sees it.
	p = load(t, `{"needAnnotation": "need", "signature": {"annotationKeys": ["other"], "labelKeys": ["app"]}}`)
	s, err := p.Filter(ctx, NewCycle(pod, nodes), nodes[0])
	if err != nil || s.Code != abiv1.Code_CODE_UNSCHEDULABLE || s.Reasons[0] != "probe: pod has no annotation need" {
		t.Fatalf("declared without it: %+v %v, want the annotation unseen", s, err)
	}
	// Declared with it: seen again.
	p = load(t, `{"needAnnotation": "need", "signature": {"annotationKeys": ["need"]}}`)
	if s, err := p.Filter(ctx, NewCycle(pod, nodes), nodes[0]); err != nil || !s.IsSuccess() {
		t.Fatalf("declared: %+v %v, want the annotation seen", s, err)
	}
	if p.Signing() != Declared {
		t.Fatalf("Signing = %v, want Declared", p.Signing())
	}
}

// Signatures are equal exactly when the declared parts are: names, UIDs and
// undeclared parts do not count, declared ones do.
func TestSignatureEquality(t *testing.T) {
	p := load(t, `{"signature": {"fields": ["namespace"], "labelKeys": ["app"], "annotationKeys": ["gpu"], "resources": ["cpu"]}}`)
	sign := func(pod *v1.Pod) []byte {
		t.Helper()
		sig, ok, reason, err := p.Sign(ctx, pod)
		if !ok || err != nil {
			t.Fatalf("Sign: %v %q %v", ok, reason, err)
		}
		return sig
	}
	base := sign(annotated("a", map[string]string{"gpu": "1", "noise": "1"}, map[string]string{"app": "x", "run": "1"}))
	same := annotated("b", map[string]string{"gpu": "1", "noise": "2"}, map[string]string{"app": "x", "run": "2"})
	same.UID = "other"
	if !bytes.Equal(base, sign(same)) {
		t.Fatal("pods differing only in name, UID and undeclared labels/annotations signed differently")
	}
	differ := map[string]*v1.Pod{
		"declared annotation": annotated("c", map[string]string{"gpu": "2"}, map[string]string{"app": "x"}),
		"declared label":      annotated("c", map[string]string{"gpu": "1"}, map[string]string{"app": "y"}),
		"namespace":           annotated("c", map[string]string{"gpu": "1"}, map[string]string{"app": "x"}),
		"cpu request":         annotated("c", map[string]string{"gpu": "1"}, map[string]string{"app": "x"}),
	}
	differ["namespace"].Namespace = "elsewhere"
	differ["cpu request"].Spec.Containers[0].Resources.Requests["cpu"] = resource.MustParse("200m")
	for what, pod := range differ {
		if bytes.Equal(base, sign(pod)) {
			t.Errorf("pods differing in their %s signed alike", what)
		}
	}
}

// A policy that signs itself gets the whole pod and its own answer.
func TestSignFunction(t *testing.T) {
	p := load(t, `{"signAnnotation": "batch"}`)
	if p.Signing() != Signs {
		t.Fatalf("Signing = %v, want Signs", p.Signing())
	}
	sig, ok, _, err := p.Sign(ctx, annotated("a", map[string]string{"batch": "b1"}, nil))
	if err != nil || !ok || string(sig) != "b1" {
		t.Fatalf("Sign = %q %v %v, want the annotation's value", sig, ok, err)
	}
	_, ok, reason, err := p.Sign(ctx, annotated("a", nil, nil))
	if err != nil || ok || reason != "the policy does not sign this pod" {
		t.Fatalf("Sign without the annotation = %v %q %v, want a refusal", ok, reason, err)
	}
}

// A signature naming a field the ABI does not have fails the load, naming
// the field.
func TestSignatureBadField(t *testing.T) {
	err := loadErr(t, `{"signature": {"fields": ["namespace", "spec.volumes"]}}`)
	var ce *engine.CallError
	if !errors.As(err, &ce) || ce.Kind != engine.KindInvalid || !strings.Contains(err.Error(), `its pod signature declares the field "spec.volumes", which the ABI's Pod does not have`) {
		t.Fatalf("Load: %v, want the bad field named", err)
	}
}

// A version that declared its signature is asked, in the next cycle of a
// pod of the same signature, only for the nodes that changed; a pod of
// another signature, or a later cycle, has every node scored again.
func TestScoreMemo(t *testing.T) {
	p := load(t, `{"scoreCount": true, "signature": {"annotationKeys": ["kind"]}}`)
	nodes := []fwk.NodeInfo{mkNode("n1", nil), mkNode("n2", nil), mkNode("n3", nil)}
	score := func(pod *v1.Pod, nodes []fwk.NodeInfo) []int64 {
		t.Helper()
		res, err := p.ScoreAllMemo(ctx, NewCycle(pod, nodes), nodes)
		if err != nil || res.Bad >= 0 || res.Normalized {
			t.Fatalf("ScoreAllMemo: %+v %v, want raw scores", res, err)
		}
		return res.Values
	}
	a := annotated("a", map[string]string{"kind": "x"}, nil)
	if got := score(a, nodes); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("first cycle: %v, want every node scored", got)
	}
	// The same nodes in another order, as the scheduler's batch rescore
	// passes them: every score reused, each its own node's.
	if got := score(a, []fwk.NodeInfo{nodes[2], nodes[0], nodes[1]}); !slices.Equal(got, []int64{3, 1, 2}) {
		t.Fatalf("same nodes reordered: %v, want each node's own score reused", got)
	}
	// Same signature, n2 changed (a pod landed there): only n2 is scored.
	nodes[1] = mkNode("n2", map[string]string{"changed": ""})
	b := annotated("b", map[string]string{"kind": "x", "other": "y"}, nil)
	if got := score(b, nodes); !slices.Equal(got, []int64{1, 4, 3}) {
		t.Fatalf("same signature, n2 changed: %v, want n1 and n3 reused, n2 scored again", got)
	}
	// Another signature: every node again.
	c := annotated("c", map[string]string{"kind": "z"}, nil)
	if got := score(c, nodes); !slices.Equal(got, []int64{5, 6, 7}) {
		t.Fatalf("other signature: %v, want every node scored", got)
	}
	// A node new since the last cycle (no memo entry yet) is scored, the
	// others reused.
	d := annotated("d", map[string]string{"kind": "z"}, nil)
	if got := score(d, append(nodes, mkNode("n4", nil))); !slices.Equal(got, []int64{5, 6, 7, 8}) {
		t.Fatalf("same signature, n4 new: %v, want n1 to n3 reused, n4 scored", got)
	}
	// A version without a declared signature is never memoised.
	q := load(t, `{"scoreCount": true}`)
	for _, want := range [][]int64{{1, 2, 3}, {4, 5, 6}} {
		res, err := q.ScoreAllMemo(ctx, NewCycle(a, nodes), nodes)
		if err != nil || !slices.Equal(res.Values, want) {
			t.Fatalf("undeclared: %+v %v, want every node scored: %v", res, err, want)
		}
	}
}

// A policy with no PreFilter, Filter, PreScore or Score (topology only
// places pod groups) cannot tell pods apart where batching reuses results,
// so it signs every pod alike without declaring a Signature and leaves the
// profile's batching on.
func TestSignNeutral(t *testing.T) {
	testwasm.SkipUnderRace(t)
	p, err := Load(ctx, Options{Name: "topology", Wasm: testwasm.Bytes(t, "examples/topology"), MaxInstances: 1, Engine: engine.Config{CallTimeout: testCallTimeout}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Cleanup(func() { _ = p.Close(ctx) })
	if p.Signing() != Neutral {
		t.Fatalf("Signing = %v, want Neutral", p.Signing())
	}
	if p.InPodCycles() {
		t.Error("InPodCycles = true for a policy that only places pod groups")
	}
	a, okA, _, errA := p.Sign(ctx, annotated("a", map[string]string{"x": "1"}, map[string]string{"app": "a"}))
	b, okB, _, errB := p.Sign(ctx, annotated("b", nil, nil))
	if !okA || !okB || errA != nil || errB != nil || !bytes.Equal(a, b) || a == nil {
		t.Fatalf("Sign = %q %v %v and %q %v %v, want equal empty signatures", a, okA, errA, b, okB, errB)
	}
	// The probe filters and declares nothing: still unsigned.
	if p := load(t, `{}`); p.Signing() != Unsigned || !p.InPodCycles() {
		t.Fatalf("probe Signing = %v, InPodCycles = %v, want Unsigned and true", p.Signing(), p.InPodCycles())
	}
}

// A policy that says from PreFilter that a pod's raw scores are final
// (Cycle.SkipNormalizeScore: the gpu example for a pod without GPUs) is not
// asked to normalise them, and they stay as Score gave them; a GPU pod's
// scores are normalised by the guest.
func TestSkipNormalizeScore(t *testing.T) {
	testwasm.SkipUnderRace(t)
	p, err := Load(ctx, Options{Name: "gpu", Wasm: testwasm.Bytes(t, "examples/gpu"), MaxInstances: 1, Engine: engine.Config{CallTimeout: testCallTimeout}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Cleanup(func() { _ = p.Close(ctx) })
	gpuNode := func(name, gpus string) fwk.NodeInfo {
		ni := mkNode(name, nil)
		ni.Node().Status.Allocatable["nvidia.com/gpu"] = resource.MustParse(gpus)
		ni.SetNode(ni.Node())
		return ni
	}
	nodes := []fwk.NodeInfo{gpuNode("g8", "8"), gpuNode("g4", "4"), mkNode("cpu", nil)}
	normalizeCalls := func() int64 { return guestCalls(p, "normalize_scores") }
	score := func(pod *v1.Pod, nodes []fwk.NodeInfo) (final bool, scores []int64, normalized int64) {
		t.Helper()
		before := normalizeCalls()
		c := NewCycle(pod, nodes)
		if _, err := p.PreFilter(ctx, c); err != nil {
			t.Fatalf("PreFilter: %v", err)
		}
		res, err := p.ScoreAllMemo(ctx, c, nodes)
		if err != nil || res.Bad >= 0 || res.Normalized {
			t.Fatalf("ScoreAllMemo: %+v %v, want raw scores", res, err)
		}
		ns := make([]NodeScore, len(nodes))
		for i, ni := range nodes {
			ns[i] = NodeScore{Name: ni.Node().Name, Score: res.Values[i]}
		}
		if s, err := p.NormalizeScore(ctx, c, nodes, ns); err != nil || !s.IsSuccess() {
			t.Fatalf("NormalizeScore: %v %v", s, err)
		}
		for _, s := range ns {
			scores = append(scores, s.Score)
		}
		return p.ScoresFinal(c), scores, normalizeCalls() - before
	}
	// Without GPUs: 0 on GPU nodes, 100 elsewhere (reserveGPUNodes), final.
	if final, got, calls := score(mkPod("cpu-pod"), nodes); !final || !slices.Equal(got, []int64{0, 0, 100}) || calls != 0 {
		t.Fatalf("pod without GPUs: final %v, scores %v, %d normalize calls; want final, [0 0 100], none", final, got, calls)
	}
	// One GPU on the GPU nodes: raw 7 and 3 GPUs left, binpacked to 0 and 100.
	gpuPod := mkPod("gpu-pod")
	gpuPod.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
	if final, got, calls := score(gpuPod, nodes[:2]); final || !slices.Equal(got, []int64{0, 100}) || calls != 1 {
		t.Fatalf("GPU pod: final %v, scores %v, %d normalize calls; want not final, [0 100], one", final, got, calls)
	}
}
