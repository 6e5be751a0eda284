package hosttest

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmsched/wasmsched/guest"
	"github.com/wasmsched/wasmsched/guest/guesttest"
	"github.com/wasmsched/wasmsched/host/convert"
	"github.com/wasmsched/wasmsched/host/eval"
)

// TestGuesttestReadsAsTheHostConverts holds guest/guesttest's YAML reader,
// which policy authors' native tests use without Kubernetes code, to the
// host's conversion: every pod and node of the examples' testdata, read by
// `wasmsched eval` and converted by host/convert, must be the message
// guesttest makes of the same file (generations and handles aside).
func TestGuesttestReadsAsTheHostConverts(t *testing.T) {
	files, err := filepath.Glob("../../examples/*/testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	var placed []*v1.Pod
	podFiles := map[string]bool{}
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "pod") {
			podFiles[f] = true
			pods, err := eval.ReadPods(f)
			if err != nil {
				t.Fatal(err)
			}
			for i, g := range guesttest.ReadPods(t, f) {
				same(t, f, convert.Pod(pods[i]), g.Message())
			}
			placed = append(placed, pods...)
		}
	}
	for _, f := range files {
		// Pods were compared above; objects*.yaml are cluster objects
		// (`wasmsched eval --objects`), neither pods nor nodes.
		if podFiles[f] || strings.HasPrefix(filepath.Base(f), "objects") {
			continue
		}
		nodes, err := eval.ReadNodes(f)
		if err != nil {
			t.Fatal(err)
		}
		// The pods of the example's own pods*.yaml files that name these
		// nodes; pods of other examples name none of them.
		dir := filepath.Dir(f)
		var here []*v1.Pod
		var guestPods []*guest.Pod
		for pf := range podFiles {
			if filepath.Dir(pf) != dir || !strings.HasPrefix(filepath.Base(pf), "pods") {
				continue
			}
			hp, err := eval.ReadPods(pf)
			if err != nil {
				t.Fatal(err)
			}
			here = append(here, hp...)
			guestPods = append(guestPods, guesttest.ReadPods(t, pf)...)
		}
		got := guesttest.ReadNodes(t, f, guestPods...)
		for i, n := range nodes {
			var on []*v1.Pod
			for _, p := range here {
				if p.Spec.NodeName == n.Name {
					on = append(on, p)
				}
			}
			want := convert.NodeInfo(0, NodeInfo(n, on...), true)
			want.Generation = 0
			same(t, f, want, got[i].Message())
		}
	}
	if len(placed) == 0 {
		t.Fatal("read no pods")
	}
}

// message is what the generated ABI code offers (it has no protobuf
// reflection): equal messages, with lists in the same order, encode the
// same.
type message interface{ MarshalVT() ([]byte, error) }

func same(t *testing.T, file string, want, got message) {
	t.Helper()
	w, err1 := want.MarshalVT()
	g, err2 := got.MarshalVT()
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: marshal: %v, %v", file, err1, err2)
	}
	if !bytes.Equal(w, g) {
		wj, _ := json.MarshalIndent(want, "", "  ")
		gj, _ := json.MarshalIndent(got, "", "  ")
		t.Errorf("%s: guesttest reads\n%s\nthe host converts\n%s", file, gj, wj)
	}
}
