//go:build !nocontrolplane

// Left out with -tags nocontrolplane: make test runs this package under the
// race detector without the tests that start a control plane, which would
// link the API server, compiled with -race on 2 cores at a cold cache, for
// them alone; they run without -race (Makefile, CP_PKGS).

package plugin

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// TestPreemption runs a real scheduler (and API server) with the test
// policy test/guests/preempt beside the default plugins, DefaultPreemption
// included.
//
// RemovePod: the policy admits a pod labelled needs-gone=victim only on a
// node from which the simulation removed the pod victim; it reads nothing
// else. The scheduler's own preemption (DefaultPreemption, pod of higher
// priority) must therefore pass its removals on to the policy: it evicts
// exactly victim, not the bystanders of the same lower priority, and
// nominates the pod to victim's node.
//
// SelectVictims: a node full of pods of the pod's own priority, which
// DefaultPreemption never evicts; the policy picks the one labelled
// expendable, the plugin's evaluator evicts it (and only it: the pod fits
// without the other), nominates the pod there, and the pod binds once the
// victim is gone.
func TestPreemption(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx := context.Background()
	cp := startCluster(t)
	client := cp.Client()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "wasmsched-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"namespace": "wasmsched-system",
		"policies": []any{map[string]any{"name": "preempt", "source": map[string]any{"file": testwasm.Path(t, "test/guests/preempt")}}}}
	if err := cp.scheduler(t, args, 0); err != nil {
		t.Fatalf("scheduler: %v", err)
	}

	for _, n := range []struct{ name, cpu string }{{"n1", "4"}, {"n2", "4"}, {"n3", "1"}} {
		alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse(n.cpu), v1.ResourceMemory: resource.MustParse("4Gi"), v1.ResourcePods: resource.MustParse("110")}
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}, Status: v1.NodeStatus{Allocatable: alloc, Capacity: alloc}}
		if n.cpu == "1" {
			node.Labels = map[string]string{"pool": "small"}
		}
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// placed creates a pod already bound to node.
	placed := func(name, node, cpu string, labels map[string]string) {
		t.Helper()
		p := newPod(name, cpu, labels)
		p.Spec.NodeName = node
		if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("RemovePod", func(t *testing.T) {
		placed("victim", "n1", "100m", nil)
		placed("bystander", "n1", "100m", nil)
		placed("elsewhere", "n2", "100m", nil)
		p := newPod("needs-room", "100m", map[string]string{"needs-gone": "victim"})
		p.Spec.PriorityClassName = "high"
		if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, client, "victim")
		// The pod never fits (the policy sees no removal outside
		// simulations), so its nomination does not last: the event says
		// where preemption placed it.
		waitEvent(t, client, "needs-room", "found a potential placement for pod on node n1, preempting 1 victims")
		for _, name := range []string{"bystander", "elsewhere"} {
			if !present(t, client, name) {
				t.Errorf("pod %s was evicted too", name)
			}
		}
	})

	t.Run("SelectVictims", func(t *testing.T) {
		placed("keep", "n3", "500m", nil)
		placed("spare", "n3", "500m", map[string]string{"expendable": "true"})
		// Equal priority (0) to both: DefaultPreemption evicts neither.
		p := newPod("wants-n3", "500m", nil)
		p.Spec.NodeSelector = map[string]string{"pool": "small"}
		if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, client, "wants-n3", "found a potential placement for pod on node n3, preempting 1 victims")
		waitGone(t, client, "spare")
		if node := waitBound(t, client, "wants-n3"); node != "n3" {
			t.Errorf("bound to %s, want n3", node)
		}
		if !present(t, client, "keep") {
			t.Error("pod keep was evicted too")
		}
	})
}

// newPod is a pod of the default scheduler requesting cpu, deleted at once
// when evicted (no kubelet here to confirm a graceful deletion).
func newPod(name, cpu string, labels map[string]string) *v1.Pod {
	zero := int64(0)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: &zero, Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}}},
	}
}

// poll waits up to 20 s for cond; on a timeout it fails the test with the
// scheduler's events, which say what it made of the pods.
func poll(t *testing.T, client kubernetes.Interface, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var err error
	testwasm.WaitFor(t, what, func() bool {
		var ok bool
		ok, err = cond(context.Background())
		return ok || err != nil
	})
	if err != nil {
		var events []string
		if evs, err := client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{}); err == nil {
			for _, e := range evs.Items {
				events = append(events, e.InvolvedObject.Name+": "+e.Reason+": "+e.Message)
			}
		}
		t.Fatalf("%s: %v; events:\n%s", what, err, strings.Join(events, "\n"))
	}
}

// waitEvent waits for an event on the pod whose message contains want.
func waitEvent(t *testing.T, client kubernetes.Interface, name, want string) {
	t.Helper()
	poll(t, client, "event on "+name+": "+want, func(ctx context.Context) (bool, error) {
		evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, want) {
				return true, nil
			}
		}
		return false, nil
	})
}

func waitBound(t *testing.T, client kubernetes.Interface, name string) string {
	t.Helper()
	var node string
	poll(t, client, "pod "+name+" bound", func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = p.Spec.NodeName
		return node != "", nil
	})
	return node
}

// waitGone waits for a pod to be deleted or terminating.
func waitGone(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	poll(t, client, "pod "+name+" evicted", func(ctx context.Context) (bool, error) { return !present(t, client, name), nil })
}

// present reports whether a pod exists and is not terminating.
func present(t *testing.T, client kubernetes.Interface, name string) bool {
	p, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return p.DeletionTimestamp == nil
}
