package convert_test

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/convert"
)

const (
	mi  = int64(1) << 20
	gi  = int64(1) << 30
	gpu = v1.ResourceName("nvidia.com/gpu")
)

// list builds a ResourceList from name, quantity pairs.
func list(kv ...string) v1.ResourceList {
	rl := make(v1.ResourceList, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		rl[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return rl
}

func container(name string, requests, limits v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: requests, Limits: limits}}
}

func podWith(name string, spec v1.PodSpec) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       spec,
	}
}

// resStr renders Resources on one line, scalars in message order.
func resStr(r *abiv1.Resources) string {
	if r == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cpu=%d mem=%d eph=%d pods=%d", r.MilliCpu, r.Memory, r.EphemeralStorage, r.Pods)
	for _, s := range r.Scalars {
		fmt.Fprintf(&b, " %s=%d", s.Name, s.Value)
	}
	return b.String()
}

func reqsStr(rs []*abiv1.Requirement) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values)
	}
	return strings.Join(parts, "; ")
}

func termStr(t *abiv1.NodeSelectorTerm) string {
	if t == nil {
		return "<nil>"
	}
	return fmt.Sprintf("expr{%s} fields{%s}", reqsStr(t.MatchExpressions), reqsStr(t.MatchFields))
}

func ownerStr(o *abiv1.OwnerReference) string {
	if o == nil {
		return "<nil>"
	}
	return o.Kind + "/" + o.Name + "/" + o.Uid
}

func selectorStr(s *abiv1.LabelSelector) string {
	if s == nil {
		return "<nil>"
	}
	keys := slices.Sorted(maps.Keys(kv(s.MatchLabels)))
	labels := make([]string, len(keys))
	for i, k := range keys {
		labels[i] = k + "=" + kv(s.MatchLabels)[k]
	}
	return fmt.Sprintf("labels{%s} expr{%s}", strings.Join(labels, ","), reqsStr(s.MatchExpressions))
}

func mustMarshal(t *testing.T, m interface{ MarshalVT() ([]byte, error) }) []byte {
	t.Helper()
	b, err := m.MarshalVT()
	if err != nil {
		t.Fatalf("MarshalVT: %v", err)
	}
	return b
}

func TestPodRequests(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	tests := []struct {
		name   string
		spec   v1.PodSpec
		status v1.PodStatus
		want   string
	}{
		{
			// The common pod: its container's requests, read directly.
			name: "one container",
			spec: v1.PodSpec{Containers: []v1.Container{
				container("a", list("cpu", "250m", "memory", "1Gi", "ephemeral-storage", "2Gi", string(gpu), "2"), list(string(gpu), "2")),
			}},
			want: fmt.Sprintf("cpu=250 mem=%d eph=%d pods=0 nvidia.com/gpu=2", gi, 2*gi),
		},
		{
			// A running pod being resized: the scheduler charges the larger
			// of what its spec asks and what the node allocated.
			name: "one container, allocated above its spec",
			spec: v1.PodSpec{Containers: []v1.Container{container("a", list("cpu", "100m", "memory", "64Mi"), nil)}},
			status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
				{Name: "a", AllocatedResources: list("cpu", "300m", "memory", "64Mi")},
			}},
			want: fmt.Sprintf("cpu=300 mem=%d eph=0 pods=0", 64*mi),
		},
		{
			// An infeasible resize: what the node allocated, not the spec.
			name: "one container, resize infeasible",
			spec: v1.PodSpec{Containers: []v1.Container{container("a", list("cpu", "500m"), nil)}},
			status: v1.PodStatus{
				Conditions:        []v1.PodCondition{{Type: v1.PodResizePending, Reason: v1.PodReasonInfeasible}},
				ContainerStatuses: []v1.ContainerStatus{{Name: "a", AllocatedResources: list("cpu", "200m")}},
			},
			want: "cpu=200 mem=0 eph=0 pods=0",
		},
		{
			// Per resource: max(sum of containers, largest init) + overhead.
			// cpu: max(100+200, 500)+10; memory: max(100+200, 400)+10 Mi;
			// ephemeral storage: containers win, max(2Gi, 1Gi).
			name: "two containers, larger init container, overhead, gpu requested",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{
					container("init", list("cpu", "500m", "memory", "400Mi", "ephemeral-storage", "1Gi"), nil),
				},
				Containers: []v1.Container{
					container("a", list("cpu", "100m", "memory", "100Mi", "ephemeral-storage", "2Gi", string(gpu), "1"),
						list(string(gpu), "1")),
					container("b", list("cpu", "200m", "memory", "200Mi"), nil),
				},
				Overhead: list("cpu", "10m", "memory", "10Mi"),
			},
			want: fmt.Sprintf("cpu=510 mem=%d eph=%d pods=0 nvidia.com/gpu=1", 410*mi, 2*gi),
		},
		{
			// Extended resources must be requested; the API server's defaulting
			// copies limits into missing requests, but a pod that never went
			// through it and sets only a limit requests nothing, and the
			// scheduler charges nothing. The same holds for cpu and memory.
			name: "gpu and cpu as limits only, not defaulted",
			spec: v1.PodSpec{
				Containers: []v1.Container{
					container("a", list("memory", "64Mi"), list("cpu", "1", string(gpu), "2")),
				},
			},
			want: fmt.Sprintf("cpu=0 mem=%d eph=0 pods=0", 64*mi),
		},
		{
			// A restartable init container runs beside the later init
			// containers and the app containers: max(50+500, 50+100+200).
			name: "sidecar before a larger init container",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{
					{Name: "sidecar", RestartPolicy: &always,
						Resources: v1.ResourceRequirements{Requests: list("cpu", "50m")}},
					container("init", list("cpu", "500m"), nil),
				},
				Containers: []v1.Container{
					container("a", list("cpu", "100m"), nil),
					container("b", list("cpu", "200m"), nil),
				},
			},
			want: "cpu=550 mem=0 eph=0 pods=0",
		},
		{
			// Several app containers and nothing else: the sum of their
			// requests, each resource summed before it is rounded (three
			// times 0.0001 CPU is 0.0003, charged as 1m, not 3m).
			name: "three containers, fractions of a millicore",
			spec: v1.PodSpec{Containers: []v1.Container{
				container("a", list("cpu", "0.0001", "memory", "100Mi", string(gpu), "1"), list(string(gpu), "1")),
				container("b", list("cpu", "0.0001", "ephemeral-storage", "1Gi"), nil),
				container("c", list("cpu", "0.0001", "memory", "28Mi"), nil),
			}},
			want: fmt.Sprintf("cpu=1 mem=%d eph=%d pods=0 nvidia.com/gpu=1", 128*mi, gi),
		},
		{
			name: "two containers, one without requests",
			spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}, container("b", list("cpu", "1500m", "memory", "1Gi"), nil)}},
			want: fmt.Sprintf("cpu=1500 mem=%d eph=0 pods=0", gi),
		},
		{
			name: "no requests",
			spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}},
			want: "cpu=0 mem=0 eph=0 pods=0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := podWith("p", tt.spec)
			pod.Status = tt.status
			if got := resStr(convert.Pod(pod).Requests); got != tt.want {
				t.Errorf("Pod().Requests = %s, want %s", got, tt.want)
			}
			pi, err := framework.NewPodInfo(pod)
			if err != nil {
				t.Fatal(err)
			}
			if got := resStr(convert.PodFromInfo(pi).Requests); got != tt.want {
				t.Errorf("PodFromInfo().Requests = %s, want %s", got, tt.want)
			}
			// What the scheduler charges a node for the pod.
			if got := resStr(convert.Resources(framework.NewNodeInfo(pod).GetRequested())); got != tt.want {
				t.Errorf("NodeInfo requested = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPodMetadata(t *testing.T) {
	yes, no := true, false
	prio := int32(1000)
	tests := []struct {
		name         string
		owners       []metav1.OwnerReference
		priority     *int32
		wantOwner    string
		wantPriority int32
	}{
		{
			name: "controller owner wins over an earlier owner",
			owners: []metav1.OwnerReference{
				{Kind: "ConfigMap", Name: "cm", UID: "u1", Controller: &no},
				{Kind: "ReplicaSet", Name: "rs", UID: "u2", Controller: &yes},
			},
			priority:     &prio,
			wantOwner:    "ReplicaSet/rs/u2",
			wantPriority: 1000,
		},
		{
			name: "first owner when none is the controller",
			owners: []metav1.OwnerReference{
				{Kind: "Job", Name: "j", UID: "u3"},
				{Kind: "ConfigMap", Name: "cm", UID: "u1"},
			},
			wantOwner: "Job/j/u3",
		},
		{
			name:      "no owner, no priority",
			wantOwner: "<nil>",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					Name: "web-1", Namespace: "shop", UID: "uid-web-1",
					Labels:          map[string]string{"app": "web"},
					Annotations:     map[string]string{"note": "x"},
					OwnerReferences: tt.owners,
				},
				Spec: v1.PodSpec{
					Priority:          tt.priority,
					PriorityClassName: "high",
					SchedulerName:     "wasm-scheduler",
					NodeSelector:      map[string]string{"disk": "ssd"},
					NodeName:          "n1",
				},
				Status: v1.PodStatus{NominatedNodeName: "n2"},
			}
			got := convert.Pod(pod)
			if got.Name != "web-1" || got.Namespace != "shop" || got.Uid != "uid-web-1" {
				t.Errorf("identity = %s/%s/%s", got.Namespace, got.Name, got.Uid)
			}
			if !maps.Equal(kv(got.Labels), pod.Labels) || !maps.Equal(kv(got.Annotations), pod.Annotations) ||
				!maps.Equal(kv(got.NodeSelector), pod.Spec.NodeSelector) {
				t.Errorf("maps = %v %v %v", got.Labels, got.Annotations, got.NodeSelector)
			}
			if s := ownerStr(got.Owner); s != tt.wantOwner {
				t.Errorf("owner = %s, want %s", s, tt.wantOwner)
			}
			if got.Priority != tt.wantPriority {
				t.Errorf("priority = %d, want %d", got.Priority, tt.wantPriority)
			}
			if got.PriorityClassName != "high" || got.SchedulerName != "wasm-scheduler" {
				t.Errorf("class, scheduler = %q, %q", got.PriorityClassName, got.SchedulerName)
			}
			if got.NodeName != "n1" || got.NominatedNodeName != "n2" {
				t.Errorf("node, nominated = %q, %q", got.NodeName, got.NominatedNodeName)
			}
		})
	}
}

func TestPodSchedulingConstraints(t *testing.T) {
	seconds := int64(300)
	minDomains := int32(3)
	honor, ignore := v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore
	pod := podWith("p", v1.PodSpec{
		Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{
				{MatchExpressions: []v1.NodeSelectorRequirement{
					{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"a", "b"}},
					{Key: "gpu", Operator: v1.NodeSelectorOpExists},
				}},
				{MatchFields: []v1.NodeSelectorRequirement{
					{Key: "metadata.name", Operator: v1.NodeSelectorOpNotIn, Values: []string{"n9"}},
				}},
				{}, // matches no node; kept
			}},
			PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{
				{Weight: 20, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{
					{Key: "cores", Operator: v1.NodeSelectorOpGt, Values: []string{"8"}},
				}}},
			},
		}},
		Tolerations: []v1.Toleration{
			{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "ml", Effect: v1.TaintEffectNoSchedule},
			{Key: "node.kubernetes.io/unreachable", Operator: v1.TolerationOpExists,
				Effect: v1.TaintEffectNoExecute, TolerationSeconds: &seconds},
			{Key: "legacy", Value: "v"}, // empty operator means Equal
		},
		TopologySpreadConstraints: []v1.TopologySpreadConstraint{
			{
				MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: v1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"app": "web"},
					MatchExpressions: []metav1.LabelSelectorRequirement{
						{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"db"}},
					},
				},
				MinDomains:         &minDomains,
				MatchLabelKeys:     []string{"pod-template-hash"},
				NodeAffinityPolicy: &honor,
				NodeTaintsPolicy:   &ignore,
			},
			// Empty selector (matches every pod), policies unset.
			{MaxSkew: 2, TopologyKey: "host", WhenUnsatisfiable: v1.ScheduleAnyway,
				LabelSelector: &metav1.LabelSelector{}},
			// Nil selector (matches no pod).
			{MaxSkew: 3, TopologyKey: "rack", WhenUnsatisfiable: v1.ScheduleAnyway},
		},
	})
	got := convert.Pod(pod)

	t.Run("required node affinity", func(t *testing.T) {
		want := []string{
			"expr{zone In [a b]; gpu Exists []} fields{}",
			"expr{} fields{metadata.name NotIn [n9]}",
			"expr{} fields{}",
		}
		var terms []string
		for _, term := range got.RequiredNodeAffinity {
			terms = append(terms, termStr(term))
		}
		if !slices.Equal(terms, want) {
			t.Errorf("terms =\n%q\nwant\n%q", terms, want)
		}
	})
	t.Run("preferred node affinity", func(t *testing.T) {
		if n := len(got.PreferredNodeAffinity); n != 1 {
			t.Fatalf("len = %d", n)
		}
		p := got.PreferredNodeAffinity[0]
		if s := termStr(p.Preference); p.Weight != 20 || s != "expr{cores Gt [8]} fields{}" {
			t.Errorf("preferred = %d %s", p.Weight, s)
		}
	})
	t.Run("tolerations", func(t *testing.T) {
		want := []string{
			"dedicated Equal ml NoSchedule <nil>",
			"node.kubernetes.io/unreachable Exists  NoExecute 300",
			"legacy Equal v  <nil>",
		}
		var tols []string
		for _, tol := range got.Tolerations {
			secs := "<nil>"
			if tol.TolerationSeconds != nil {
				secs = fmt.Sprint(*tol.TolerationSeconds)
			}
			tols = append(tols, fmt.Sprintf("%s %s %s %s %s", tol.Key, tol.Operator, tol.Value, tol.Effect, secs))
		}
		if !slices.Equal(tols, want) {
			t.Errorf("tolerations =\n%q\nwant\n%q", tols, want)
		}
	})
	t.Run("topology spread constraints", func(t *testing.T) {
		want := []string{
			"1 zone DoNotSchedule labels{app=web} expr{tier NotIn [db]} min=3 keys=[pod-template-hash] Honor Ignore",
			"2 host ScheduleAnyway labels{} expr{} min=<nil> keys=[]  ",
			"3 rack ScheduleAnyway <nil> min=<nil> keys=[]  ",
		}
		var cs []string
		for _, c := range got.TopologySpreadConstraints {
			minD := "<nil>"
			if c.MinDomains != nil {
				minD = fmt.Sprint(*c.MinDomains)
			}
			cs = append(cs, fmt.Sprintf("%d %s %s %s min=%s keys=%v %s %s", c.MaxSkew, c.TopologyKey,
				c.WhenUnsatisfiable, selectorStr(c.LabelSelector), minD, c.MatchLabelKeys,
				c.NodeAffinityPolicy, c.NodeTaintsPolicy))
		}
		if !slices.Equal(cs, want) {
			t.Errorf("constraints =\n%q\nwant\n%q", cs, want)
		}
	})
	t.Run("survives the wire", func(t *testing.T) {
		var back abiv1.Pod
		if err := back.UnmarshalVT(mustMarshal(t, got)); err != nil {
			t.Fatal(err)
		}
		if s := termStr(back.RequiredNodeAffinity[2]); len(back.RequiredNodeAffinity) != 3 || s != "expr{} fields{}" {
			t.Errorf("empty term lost: %d terms", len(back.RequiredNodeAffinity))
		}
		tsc := back.TopologySpreadConstraints
		if tsc[1].LabelSelector == nil || tsc[2].LabelSelector != nil {
			t.Errorf("empty vs nil selector lost: %v, %v", tsc[1].LabelSelector, tsc[2].LabelSelector)
		}
		if *back.Tolerations[1].TolerationSeconds != 300 || back.Tolerations[0].TolerationSeconds != nil {
			t.Errorf("toleration seconds lost")
		}
	})
	t.Run("shares no mutable memory with the pod", func(t *testing.T) {
		got := convert.Pod(pod)
		got.RequiredNodeAffinity[0].MatchExpressions[0].Values[0] = "changed"
		got.TopologySpreadConstraints[0].LabelSelector.MatchLabels[0].Value = "changed"
		*got.Tolerations[1].TolerationSeconds = 1
		spec := pod.Spec
		if spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "a" ||
			spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels["app"] != "web" ||
			*spec.Tolerations[1].TolerationSeconds != 300 {
			t.Error("changing the message changed the pod")
		}
	})
}

func TestResourceList(t *testing.T) {
	tests := []struct {
		name string
		rl   v1.ResourceList
		want string
	}{
		{
			name: "gpu node with hugepages",
			rl: list("cpu", "3500m", "memory", "16Gi", "ephemeral-storage", "100Gi", "pods", "110",
				"nvidia.com/gpu", "4", "hugepages-2Mi", "1Gi", "hugepages-1Gi", "2Gi", "example.com/fpga", "0"),
			want: fmt.Sprintf("cpu=3500 mem=%d eph=%d pods=110 example.com/fpga=0 hugepages-1Gi=%d hugepages-2Mi=%d nvidia.com/gpu=4",
				16*gi, 100*gi, 2*gi, gi),
		},
		{
			// Value rounds a fraction up, MilliValue keeps milli precision.
			name: "fractional quantities",
			rl:   list("cpu", "1.5", "memory", "1500m"),
			want: "cpu=1500 mem=2 eph=0 pods=0",
		},
		{name: "empty", rl: v1.ResourceList{}, want: "cpu=0 mem=0 eph=0 pods=0"},
		{name: "nil", rl: nil, want: "<nil>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resStr(convert.ResourceList(tt.rl)); got != tt.want {
				t.Errorf("ResourceList() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestResources(t *testing.T) {
	tests := []struct {
		name string
		r    *framework.Resource
		want string
	}{
		{
			name: "scalars sorted, zero scalars dropped",
			r: &framework.Resource{MilliCPU: 2000, Memory: 4 * gi, EphemeralStorage: 10 * gi, AllowedPodNumber: 110,
				ScalarResources: map[v1.ResourceName]int64{"nvidia.com/gpu": 2, "hugepages-2Mi": 2 * mi, "example.com/fpga": 0}},
			want: fmt.Sprintf("cpu=2000 mem=%d eph=%d pods=110 hugepages-2Mi=%d nvidia.com/gpu=2", 4*gi, 10*gi, 2*mi),
		},
		{name: "zero", r: &framework.Resource{}, want: "cpu=0 mem=0 eph=0 pods=0"},
		{name: "typed nil", r: nil, want: "<nil>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resStr(convert.Resources(tt.r)); got != tt.want {
				t.Errorf("Resources() = %s, want %s", got, tt.want)
			}
		})
	}
	if convert.Resources(nil) != nil {
		t.Error("Resources(nil) != nil")
	}
}

func gpuNode() *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "n1",
			Labels:      map[string]string{"zone": "a"},
			Annotations: map[string]string{"rack": "r7"},
		},
		Spec: v1.NodeSpec{
			Unschedulable: true,
			Taints: []v1.Taint{
				{Key: "dedicated", Value: "ml", Effect: v1.TaintEffectNoSchedule},
				{Key: "node.kubernetes.io/unschedulable", Effect: v1.TaintEffectNoSchedule},
			},
		},
		Status: v1.NodeStatus{
			Capacity: list("cpu", "8", "memory", "32Gi", "pods", "110", "nvidia.com/gpu", "4", "hugepages-2Mi", "1Gi"),
			Allocatable: list("cpu", "7800m", "memory", "30Gi", "ephemeral-storage", "90Gi", "pods", "110",
				"nvidia.com/gpu", "4", "hugepages-2Mi", "1Gi"),
			Conditions: []v1.NodeCondition{
				{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "not copied"},
				{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientMemory"},
			},
		},
	}
}

func TestNode(t *testing.T) {
	node := gpuNode()
	got := convert.Node(node)
	if got.Name != "n1" || !maps.Equal(kv(got.Labels), node.Labels) || !maps.Equal(kv(got.Annotations), node.Annotations) {
		t.Errorf("identity = %q %v %v", got.Name, got.Labels, got.Annotations)
	}
	if !got.Unschedulable {
		t.Error("unschedulable lost")
	}
	var taints []string
	for _, tn := range got.Taints {
		taints = append(taints, tn.Key+"="+tn.Value+":"+tn.Effect)
	}
	if want := []string{"dedicated=ml:NoSchedule", "node.kubernetes.io/unschedulable=:NoSchedule"}; !slices.Equal(taints, want) {
		t.Errorf("taints = %q, want %q", taints, want)
	}
	var conds []string
	for _, c := range got.Conditions {
		conds = append(conds, c.Type+"="+c.Status+"/"+c.Reason)
	}
	if want := []string{"Ready=True/KubeletReady", "MemoryPressure=False/KubeletHasSufficientMemory"}; !slices.Equal(conds, want) {
		t.Errorf("conditions = %q, want %q", conds, want)
	}
	wantAlloc := fmt.Sprintf("cpu=7800 mem=%d eph=%d pods=110 hugepages-2Mi=%d nvidia.com/gpu=4", 30*gi, 90*gi, gi)
	if s := resStr(got.Allocatable); s != wantAlloc {
		t.Errorf("allocatable = %s, want %s", s, wantAlloc)
	}
	wantCap := fmt.Sprintf("cpu=8000 mem=%d eph=0 pods=110 hugepages-2Mi=%d nvidia.com/gpu=4", 32*gi, gi)
	if s := resStr(got.Capacity); s != wantCap {
		t.Errorf("capacity = %s, want %s", s, wantCap)
	}
	if convert.Node(nil) != nil {
		t.Error("Node(nil) != nil")
	}
}

// placedPods are three pods bound to n1, deliberately not in namespace/name
// order.
func placedPods() []*v1.Pod {
	yes := true
	prio := int32(7)
	a := podWith("train", v1.PodSpec{NodeName: "n1", Priority: &prio, Containers: []v1.Container{
		container("c", list("cpu", "1", "memory", "2Gi", "nvidia.com/gpu", "2"), list("nvidia.com/gpu", "2")),
	}})
	a.Namespace = "ml"
	a.Labels = map[string]string{"app": "train"}
	a.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "train", UID: "job-uid", Controller: &yes}}
	b := podWith("web", v1.PodSpec{NodeName: "n1", Containers: []v1.Container{
		container("c", list("cpu", "250m", "memory", "256Mi"), nil),
	}})
	c := podWith("api", v1.PodSpec{NodeName: "n1", Containers: []v1.Container{
		container("c", list("cpu", "500m", "memory", "512Mi", "hugepages-2Mi", "64Mi"), list("hugepages-2Mi", "64Mi")),
	}})
	return []*v1.Pod{a, b, c}
}

func TestNodeInfo(t *testing.T) {
	pods := placedPods()
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(gpuNode())

	wantRequested := fmt.Sprintf("cpu=1750 mem=%d eph=0 pods=3 hugepages-2Mi=%d nvidia.com/gpu=2", 2*gi+768*mi, 64*mi)
	wantPods := []string{
		fmt.Sprintf("default/api uid-api prio=0 owner=<nil> cpu=500 mem=%d eph=0 pods=0 hugepages-2Mi=%d", 512*mi, 64*mi),
		fmt.Sprintf("default/web uid-web prio=0 owner=<nil> cpu=250 mem=%d eph=0 pods=0", 256*mi),
		fmt.Sprintf("ml/train uid-train prio=7 owner=Job/train/job-uid cpu=1000 mem=%d eph=0 pods=0 nvidia.com/gpu=2", 2*gi),
	}
	tests := []struct {
		name     string
		withPods bool
		wantPods []string
	}{
		{name: "with pods", withPods: true, wantPods: wantPods},
		{name: "without pods", withPods: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := convert.NodeInfo(42, ni, tt.withPods)
			if got.Handle != 42 || got.Generation != ni.GetGeneration() || got.PodCount != 3 {
				t.Errorf("handle, generation, pod_count = %d, %d, %d; want 42, %d, 3",
					got.Handle, got.Generation, got.PodCount, ni.GetGeneration())
			}
			if got.Node.GetName() != "n1" || resStr(got.Node.Allocatable) != resStr(convert.ResourceList(gpuNode().Status.Allocatable)) {
				t.Errorf("node = %q %s", got.Node.GetName(), resStr(got.Node.GetAllocatable()))
			}
			if s := resStr(got.Requested); s != wantRequested {
				t.Errorf("requested = %s, want %s", s, wantRequested)
			}
			var summaries []string
			for _, p := range got.Pods {
				summaries = append(summaries, fmt.Sprintf("%s/%s %s prio=%d owner=%s %s",
					p.Namespace, p.Name, p.Uid, p.Priority, ownerStr(p.Owner), resStr(p.Requests)))
			}
			if !slices.Equal(summaries, tt.wantPods) {
				t.Errorf("pods =\n%q\nwant\n%q", summaries, tt.wantPods)
			}
			if tt.withPods && !maps.Equal(kv(got.Pods[2].Labels), map[string]string{"app": "train"}) {
				t.Errorf("labels = %v", got.Pods[2].Labels)
			}
		})
	}

	t.Run("after the gpu pod leaves", func(t *testing.T) {
		ni := framework.NewNodeInfo(placedPods()...)
		ni.SetNode(gpuNode())
		if err := ni.RemovePod(klog.Background(), pods[0]); err != nil {
			t.Fatal(err)
		}
		// The scheduler keeps nvidia.com/gpu=0 in its map; the message does not.
		// requested.pods counts the pods on the node (the scheduler does not).
		want := fmt.Sprintf("cpu=750 mem=%d eph=0 pods=2 hugepages-2Mi=%d", 768*mi, 64*mi)
		if got := convert.NodeInfo(1, ni, false); resStr(got.Requested) != want || got.PodCount != 2 {
			t.Errorf("requested = %s, pod_count = %d; want %s, 2", resStr(got.Requested), got.PodCount, want)
		}
	})

	t.Run("without a node object", func(t *testing.T) {
		got := convert.NodeInfo(3, framework.NewNodeInfo(placedPods()...), true)
		if got.Node != nil || got.PodCount != 3 || len(got.Pods) != 3 {
			t.Errorf("node = %v, pod_count = %d, pods = %d", got.Node, got.PodCount, len(got.Pods))
		}
	})
}

func TestWaitingPod(t *testing.T) {
	p := podWith("w", v1.PodSpec{})
	p.Labels = map[string]string{"gang": "g1"}
	p.Annotations = map[string]string{"size": "4"}
	got := convert.WaitingPod(p, "n7")
	if got.Name != "w" || got.Namespace != "default" || got.Uid != "uid-w" || got.NodeName != "n7" ||
		!maps.Equal(kv(got.Labels), p.Labels) || !maps.Equal(kv(got.Annotations), p.Annotations) {
		t.Errorf("WaitingPod() = %s/%s %s on %s %v %v",
			got.Namespace, got.Name, got.Uid, got.NodeName, got.Labels, got.Annotations)
	}
}

// TestDeterministicEncoding converts equal inputs afresh each round, so the
// random iteration order of the scheduler's resource maps gets a chance to
// show. Every map field here has at most one entry, because the generated
// marshaller writes map entries in Go's random map order (see the package
// doc); that is outside this package.
func TestDeterministicEncoding(t *testing.T) {
	scalars := list("cpu", "1", "memory", "1Gi",
		"nvidia.com/gpu", "1", "hugepages-2Mi", "2Mi", "hugepages-1Gi", "1Gi", "example.com/a", "1",
		"example.com/b", "2", "example.com/c", "3", "example.com/d", "4", "example.com/e", "5")
	newPod := func(name string) *v1.Pod {
		p := podWith(name, v1.PodSpec{NodeName: "n1", Containers: []v1.Container{container("c", scalars, nil)}})
		p.Labels = map[string]string{"app": name}
		return p
	}
	newNode := func() *v1.Node {
		n := gpuNode()
		n.Status.Allocatable = scalars
		n.Status.Capacity = scalars
		return n
	}
	encode := func(pods ...*v1.Pod) (pod, nodeInfo []byte) {
		ni := framework.NewNodeInfo(pods...)
		ni.SetNode(newNode())
		m := convert.NodeInfo(5, ni, true)
		m.Generation = 0 // a fresh NodeInfo has a fresh generation
		return mustMarshal(t, convert.Pod(newPod("a"))), mustMarshal(t, m)
	}

	wantPod, wantNodeInfo := encode(newPod("a"), newPod("b"), newPod("c"))
	msg := convert.Pod(newPod("a"))
	if got := resStr(msg.Requests); !strings.Contains(got,
		"example.com/a=1 example.com/b=2 example.com/c=3 example.com/d=4 example.com/e=5 hugepages-1Gi") {
		t.Fatalf("scalars not sorted: %s", got)
	}
	for round := range 20 {
		// Pods added in a different order each round.
		pods := []*v1.Pod{newPod("a"), newPod("b"), newPod("c")}
		for i := 0; i < round%3; i++ {
			pods = append(pods[1:], pods[0])
		}
		gotPod, gotNodeInfo := encode(pods...)
		if !bytes.Equal(gotPod, wantPod) {
			t.Fatalf("round %d: pod encoding differs", round)
		}
		if !bytes.Equal(gotNodeInfo, wantNodeInfo) {
			t.Fatalf("round %d: NodeInfo encoding differs", round)
		}
	}
	if b1, b2 := mustMarshal(t, msg), mustMarshal(t, msg); !bytes.Equal(b1, b2) {
		t.Error("marshalling one message twice gives different bytes")
	}
}

// kv turns a KeyValue list back into a map, failing on unsorted or
// duplicated keys.
func kv(list []*abiv1.KeyValue) map[string]string {
	m := map[string]string{}
	for i, e := range list {
		if i > 0 && list[i-1].Key >= e.Key {
			panic("KeyValue list not sorted by key: " + list[i-1].Key + " >= " + e.Key)
		}
		m[e.Key] = e.Value
	}
	return m
}
