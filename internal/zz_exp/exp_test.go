package zzexp

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/convert"
	"github.com/wasmsched/wasmsched/host/engine"
)

func TestDecode(t *testing.T) {
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", "/tmp/dec.wasm", "./g")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatal(string(out))
	}
	bin, _ := os.ReadFile("/tmp/dec.wasm")
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	m, err := r.InstantiateModule(ctx, must(r.CompileModule(ctx, bin)), wazero.NewModuleConfig().WithStartFunctions("_initialize"))
	if err != nil {
		t.Fatal(err)
	}
	req := v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("512Mi")}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-7d9f8c6b5-00001", Namespace: "shop", UID: "0b5c2a52-6f0e-4c1b-9d3e-1f2a3b4c5d6e",
		Labels: map[string]string{"app": "web", "tier": "frontend", "pod-template-hash": "7d9f8c6b5", "team": "checkout"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Resources: v1.ResourceRequirements{Requests: req}}}}}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-00001", Labels: map[string]string{"kubernetes.io/hostname": "node-00001", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "topology.kubernetes.io/zone": "zone-1", "topology.kubernetes.io/region": "eu-1", "node.kubernetes.io/instance-type": "m5.2xlarge"}},
		Status: v1.NodeStatus{Allocatable: req, Capacity: req, Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady"}}}}
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	for _, tc := range []struct {
		name, fn string
		msg      []byte
	}{
		{"pod", "decode", engine.Marshal(&abiv1.CycleRequest{Cycle: 1, Pod: convert.Pod(pod)})},
		{"node", "decodenode", engine.Marshal(&abiv1.NodeSync{Upserts: []*abiv1.NodeInfo{convert.NodeInfo(1, ni, false)}})},
	} {
		res, _ := m.ExportedFunction("buf").Call(ctx, uint64(len(tc.msg)))
		m.Memory().Write(uint32(res[0]), tc.msg)
		const n = 20000
		t0 := time.Now()
		out, err := m.ExportedFunction(tc.fn).Call(ctx, n)
		el := time.Since(t0)
		var native time.Duration
		t1 := time.Now()
		for i := 0; i < n; i++ {
			var x abiv1.NodeSync
			var y abiv1.CycleRequest
			if tc.fn == "decode" {
				_ = y.UnmarshalVT(tc.msg)
			} else {
				_ = x.UnmarshalVT(tc.msg)
			}
		}
		native = time.Since(t1)
		fmt.Printf("%s: %d bytes, wasm %v/decode, native %v/decode (ok=%v err=%v)\n", tc.name, len(tc.msg), el/n, native/n, out, err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
