package plugin

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

func TestPodMatches(t *testing.T) {
	pod := func(ns string, labels map[string]string, gpus string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: labels},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}}}}
		if gpus != "" {
			p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse(gpus)
		}
		return p
	}
	rejected := pod("a", map[string]string{"gang": "g1"}, "")
	for _, tc := range []struct {
		name  string
		m     *abiv1.PodMatch
		other *v1.Pod
		want  bool
	}{
		{"not declared", nil, pod("a", nil, ""), false},
		{"any pod", &abiv1.PodMatch{}, pod("b", nil, ""), true},
		{"same namespace", &abiv1.PodMatch{SameNamespace: true}, pod("a", nil, ""), true},
		{"other namespace", &abiv1.PodMatch{SameNamespace: true}, pod("b", nil, ""), false},
		{"same label value", &abiv1.PodMatch{SameLabelKeys: []string{"gang"}}, pod("b", map[string]string{"gang": "g1"}, ""), true},
		{"other label value", &abiv1.PodMatch{SameLabelKeys: []string{"gang"}}, pod("a", map[string]string{"gang": "g2"}, ""), false},
		{"requests the resource", &abiv1.PodMatch{Resources: []string{"nvidia.com/gpu"}}, pod("b", nil, "2"), true},
		{"requests cpu only", &abiv1.PodMatch{Resources: []string{"nvidia.com/gpu"}}, pod("b", nil, ""), false},
		{"one condition suffices", &abiv1.PodMatch{SameNamespace: true, Resources: []string{"nvidia.com/gpu"}}, pod("a", nil, ""), true},
	} {
		if got := podMatches(tc.m, rejected, tc.other, nil); got != tc.want {
			t.Errorf("%s: podMatches = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestLabelsChanged(t *testing.T) {
	old := map[string]string{"a": "1", "b": "2"}
	for _, tc := range []struct {
		keys []string
		cur  map[string]string
		want bool
	}{
		{[]string{"a"}, map[string]string{"a": "1", "b": "3"}, false},
		{[]string{"a"}, map[string]string{"a": "2", "b": "2"}, true},
		{[]string{"a"}, map[string]string{"b": "2"}, true},
		{[]string{"c"}, map[string]string{"a": "1", "b": "2", "c": ""}, true},
		{[]string{"*"}, map[string]string{"a": "1", "b": "3"}, true},
		{[]string{"*"}, map[string]string{"a": "1", "b": "2"}, false},
		{nil, map[string]string{}, false},
	} {
		if got := labelsChanged(tc.keys, old, tc.cur); got != tc.want {
			t.Errorf("keys %v, %v -> %v: labelsChanged = %v, want %v", tc.keys, old, tc.cur, got, tc.want)
		}
	}
}

// The rejected pod's own update retries it only when it changed what a
// policy is sent: the scheduler's own status write after a failed attempt
// does not.
func TestOwnUpdateHint(t *testing.T) {
	pl := &Plugin{}
	old := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "a", UID: "u1", ResourceVersion: "1", Annotations: map[string]string{"x": "1"}}}
	for _, tc := range []struct {
		name   string
		change func(*v1.Pod)
		want   fwk.QueueingHint
	}{
		{"PodScheduled condition", func(p *v1.Pod) {
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "Unschedulable"}}
		}, fwk.QueueSkip},
		{"annotation", func(p *v1.Pod) { p.Annotations = map[string]string{"x": "2"} }, fwk.Queue},
		{"label", func(p *v1.Pod) { p.Labels = map[string]string{"y": ""} }, fwk.Queue},
		{"nominated node", func(p *v1.Pod) { p.Status.NominatedNodeName = "n1" }, fwk.Queue},
		{"toleration", func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}} }, fwk.Queue},
	} {
		cur := old.DeepCopy()
		cur.ResourceVersion = "2"
		tc.change(cur)
		got, err := pl.hintPodUpdated(klog.Background(), old, old, cur)
		if err != nil || got != tc.want {
			t.Errorf("%s: hint %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
}

// requestsMemo answers for the pods of the last event without converting
// them again, and tells a request going down from one going up.
func TestRequestsMemo(t *testing.T) {
	pod := func(cpu, gpus string) *v1.Pod {
		req := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
		if gpus != "" {
			req["nvidia.com/gpu"] = resource.MustParse(gpus)
		}
		return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: req}}}}}
	}
	var m requestsMemo
	a := pod("2", "1")
	if m.of(a) != m.of(a) {
		t.Fatal("the same pod converted twice")
	}
	for _, tc := range []struct {
		name     string
		old, cur *v1.Pod
		want     bool
	}{
		{"cpu down", pod("2", "1"), pod("1", "1"), true},
		{"gpu removed", pod("2", "1"), pod("2", ""), true},
		{"gpu down", pod("2", "2"), pod("2", "1"), true},
		{"cpu up", pod("1", "1"), pod("2", "1"), false},
		{"gpu added", pod("2", ""), pod("2", "1"), false},
		{"unchanged", pod("2", "1"), pod("2", "1"), false},
	} {
		if got := m.shrank(tc.old, tc.cur); got != tc.want {
			t.Errorf("%s: shrank = %v, want %v", tc.name, got, tc.want)
		}
	}
}
