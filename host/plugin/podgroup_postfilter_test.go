//go:build !k8s1.35 && !k8s1.36

package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/engine"
	"github.com/wasmsched/wasmsched/host/lifecycle"
	"github.com/wasmsched/wasmsched/host/policy"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// TestPodGroupPostFilter drives the plugin's PodGroupPostFilter with the
// groupprobe guest answering each way: its reasons reach the group's
// status prefixed with the policy, UnschedulableAndUnresolvable and
// Success end the policies' turn (Success with the members nominated), a
// trap, a timeout or an Error fail the cycle with the error unless the
// policy's failurePolicy is Ignore, and the policies' own rejection of the
// group at PlacementGenerate is handed to the guest.
func TestPodGroupPostFilter(t *testing.T) {
	wasm := testwasm.Bytes(t, "test/guests/groupprobe")
	load := func(t *testing.T, name, postFilter string, ignore bool) *lifecycle.Slot {
		cfg := engine.Config{CallTimeout: 5 * time.Second}
		if postFilter == "loop" {
			cfg.CallTimeout = 100 * time.Millisecond
		}
		p, err := policy.Load(context.Background(), policy.Options{Name: name, Wasm: wasm, Settings: []byte(`{"postFilter":"` + postFilter + `"}`), Engine: cfg, MaxInstances: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close(context.Background()) })
		fp := lifecycle.FailurePolicyFail
		if ignore {
			fp = lifecycle.FailurePolicyIgnore
		}
		return lifecycle.NewFixedSlot(lifecycle.PolicyArgs{Name: name, FailurePolicy: fp, Weight: 1}, p)
	}
	pods := []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "w0", Namespace: "ml", UID: "u0"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: "ml", UID: "u1"}},
	}
	info := &framework.PodGroupInfo{Namespace: "ml", Name: "train", UnscheduledPods: pods,
		PodGroup: &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train"}}}
	nodes := []fwk.NodeInfo{namedNode("a1"), namedNode("b1")}
	run := func(pl *Plugin, state fwk.PodGroupCycleState) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
		return pl.podGroupPostFilter(context.Background(), pl.placementPolicies(abiv1.Point_POINT_POD_GROUP_POST_FILTER), state, info, nodes)
	}

	t.Run("reasons", func(t *testing.T) {
		pl := fixedPlugin(load(t, "first", "reject", false), load(t, "second", "reject", false))
		res, s := run(pl, nil)
		want := "policy first: groupprobe: group ml/train of 2 pods fits none of 2 nodes, policy second: groupprobe: group ml/train of 2 pods fits none of 2 nodes"
		if res != nil || s.Code() != fwk.Unschedulable || strings.Join(s.Reasons(), ", ") != want || s.Plugin() != Name {
			t.Errorf("got %v %v (%s), want Unschedulable %q", res, s.Code(), strings.Join(s.Reasons(), ", "), want)
		}
	})
	t.Run("rejection", func(t *testing.T) {
		state := framework.NewCycleState()
		state.Write(groupRejectionKey, &groupRejection{policy: "racks", msg: "policy racks: no rack holds 2 pods"})
		_, s := run(fixedPlugin(load(t, "first", "reject", false)), state)
		if want := "after policy racks: no rack holds 2 pods"; !strings.HasSuffix(s.Message(), want) {
			t.Errorf("got %q, want it to end %q", s.Message(), want)
		}
	})
	t.Run("unresolvable", func(t *testing.T) {
		_, s := run(fixedPlugin(load(t, "first", "unresolvable", false), load(t, "second", "nominate", false)), nil)
		if s.Code() != fwk.UnschedulableAndUnresolvable || s.Message() != "policy first: groupprobe: group ml/train never fits" {
			t.Errorf("got %v %q", s.Code(), s.Message())
		}
	})
	t.Run("nominate", func(t *testing.T) {
		res, s := run(fixedPlugin(load(t, "first", "reject", false), load(t, "second", "nominate", false)), nil)
		if !s.IsSuccess() || res == nil || len(res.NominatingInfos) != 2 {
			t.Fatalf("got %v %v", res, s)
		}
		for _, name := range []string{"w0", "w1"} {
			ni := res.NominatingInfos[types.NamespacedName{Namespace: "ml", Name: name}]
			if ni == nil || ni.NominatedNodeName != "a1" || ni.NominatingMode != fwk.ModeOverride {
				t.Errorf("pod %s nominated %+v, want a1", name, ni)
			}
		}
	})
	for _, c := range []struct{ mode, want string }{
		{"panic", "pod_group_post_filter: wasm error: unreachable: panic: groupprobe: panic in PodGroupPostFilter"},
		{"loop", "pod_group_post_filter: deadline of 100ms exceeded"},
		{"error", "policy first: pod_group_post_filter: groupprobe: error in PodGroupPostFilter"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			_, s := run(fixedPlugin(load(t, "first", c.mode, false)), nil)
			if s.Code() != fwk.Error || !strings.HasPrefix(s.Message(), "policy first") || !strings.HasSuffix(s.Message(), c.want) {
				t.Errorf("got %v %q, want Error naming policy first and ending %q", s.Code(), s.Message(), c.want)
			}
			// Under failurePolicy Ignore the policy is passed over.
			_, s = run(fixedPlugin(load(t, "first", c.mode, true), load(t, "second", "reject", false)), nil)
			if s.Code() != fwk.Unschedulable || !strings.HasPrefix(s.Message(), "policy second: ") {
				t.Errorf("ignored: got %v %q, want the second policy's reason", s.Code(), s.Message())
			}
		})
	}
	t.Run("composite", func(t *testing.T) {
		pl := fixedPlugin(load(t, "first", "panic", false))
		composite := &framework.PodGroupInfo{Namespace: "ml", Name: "job", Type: fwk.CompositePodGroupKeyType}
		res, s := pl.PodGroupPostFilter(context.Background(), nil, composite, nil)
		if res != nil || s.Code() != fwk.Unschedulable || len(s.Reasons()) != 0 {
			t.Errorf("a composite group: %v %v, want Unschedulable without asking the policy", res, s)
		}
	})
	t.Run("none", func(t *testing.T) {
		res, s := (&Plugin{}).PodGroupPostFilter(context.Background(), nil, info, nil)
		if res != nil || s.Code() != fwk.Unschedulable || len(s.Reasons()) != 0 {
			t.Errorf("without policies: %v %v", res, s)
		}
	})
}

func namedNode(name string) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	return ni
}
