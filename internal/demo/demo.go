// Package demo builds the small cluster that `wasmsched-up --demo` shows:
// nodes in three zones, some with NVIDIA GPUs labelled the way GPU Feature
// Discovery labels them, and sample pods for the gpu, zone and gang example
// policies, each with the outcome it is expected to have.
package demo

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Namespace holds the demo pods.
const Namespace = "demo"

// Policies are the example policies the demo configures, in order, with
// their settings.
var Policies = []struct {
	Name     string
	Settings string
	Weight   int
}{
	{"gpu", `{"strategy": "binpack", "reserveGPUNodes": true}`, 2},
	{"zone", `{"groupLabel": "app", "maxSkew": 1}`, 1},
	{"gang", `{"timeoutSeconds": 10}`, 1},
}

// Pod is a demo pod and its expected outcome.
type Pod struct {
	Pod *v1.Pod
	// Placed says whether the pod is expected to be bound.
	Placed bool
	// Why explains the expectation, for the table.
	Why string
}

type nodeSpec struct {
	name, zone string
	gpus       int64
	product    string
	memoryMiB  string
}

var nodes = []nodeSpec{
	{name: "a-cpu-1", zone: "zone-a"},
	{name: "a-gpu-1", zone: "zone-a", gpus: 4, product: "NVIDIA-A100-SXM4-80GB", memoryMiB: "81920"},
	{name: "b-cpu-1", zone: "zone-b"},
	{name: "b-gpu-1", zone: "zone-b", gpus: 2, product: "NVIDIA-L4", memoryMiB: "23034"},
	{name: "c-cpu-1", zone: "zone-c"},
	{name: "c-cpu-2", zone: "zone-c"},
}

// Nodes returns the demo nodes.
func Nodes() []*v1.Node {
	out := make([]*v1.Node, 0, len(nodes))
	for _, s := range nodes {
		labels := map[string]string{
			"kubernetes.io/hostname":      s.name,
			"kubernetes.io/os":            "linux",
			"topology.kubernetes.io/zone": s.zone,
		}
		alloc := v1.ResourceList{
			v1.ResourceCPU:    resource.MustParse("8"),
			v1.ResourceMemory: resource.MustParse("32Gi"),
			v1.ResourcePods:   resource.MustParse("110"),
		}
		if s.gpus > 0 {
			labels["nvidia.com/gpu.present"] = "true"
			labels["nvidia.com/gpu.product"] = s.product
			labels["nvidia.com/gpu.memory"] = s.memoryMiB
			labels["nvidia.com/gpu.count"] = fmt.Sprint(s.gpus)
			labels["nvidia.com/gpu.sharing-strategy"] = "none"
			alloc["nvidia.com/gpu"] = *resource.NewQuantity(s.gpus, resource.DecimalSI)
		}
		out = append(out, &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: s.name, Labels: labels},
			Status: v1.NodeStatus{
				Capacity:    alloc.DeepCopy(),
				Allocatable: alloc,
				Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady"}},
			},
		})
	}
	return out
}

func pod(name string, labels, annotations map[string]string, gpus int64) *v1.Pod {
	req := v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("1Gi")}
	if gpus > 0 {
		req["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: labels, Annotations: annotations},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "main", Image: "registry.k8s.io/pause:3.10",
			Resources: v1.ResourceRequirements{Requests: req, Limits: req},
		}}},
	}
}

// Pods returns the demo pods with their expected outcomes.
func Pods() []Pod {
	gang := func(name, group, min string) *v1.Pod {
		return pod(name, map[string]string{"gang.wasmsched.io/name": group}, map[string]string{"gang.wasmsched.io/min-available": min}, 0)
	}
	return []Pod{
		{pod("web-1", map[string]string{"app": "web"}, nil, 0), true, "zone: spread over zones, gpu: off GPU nodes"},
		{pod("web-2", map[string]string{"app": "web"}, nil, 0), true, "zone: spread over zones, gpu: off GPU nodes"},
		{pod("web-3", map[string]string{"app": "web"}, nil, 0), true, "zone: spread over zones, gpu: off GPU nodes"},
		{pod("train-a100", nil, map[string]string{"gpu.wasmsched.io/product": "NVIDIA-A100-SXM4-80GB"}, 2), true, "gpu: needs an A100"},
		{pod("infer-l4", nil, map[string]string{"gpu.wasmsched.io/min-memory-mib": "16000"}, 1), true, "gpu: binpacks onto the fullest fit"},
		{pod("train-huge", nil, nil, 8), false, "gpu: no node has 8 free GPUs"},
		{pod("train-h100", nil, map[string]string{"gpu.wasmsched.io/product": "NVIDIA-H100-80GB-HBM3"}, 1), false, "gpu: no H100 in the cluster"},
		{gang("ring-0", "ring", "3"), true, "gang: 3 of 3 members"},
		{gang("ring-1", "ring", "3"), true, "gang: 3 of 3 members"},
		{gang("ring-2", "ring", "3"), true, "gang: 3 of 3 members"},
		{gang("pair-0", "pair", "3"), false, "gang: only 2 of 3 members exist"},
		{gang("pair-1", "pair", "3"), false, "gang: only 2 of 3 members exist"},
	}
}

// Create makes the namespace, nodes and pods.
func Create(ctx context.Context, c kubernetes.Interface) ([]Pod, error) {
	if _, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	for _, n := range Nodes() {
		if _, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create node %s: %w", n.Name, err)
		}
	}
	pods := Pods()
	for _, p := range pods {
		if _, err := c.CoreV1().Pods(Namespace).Create(ctx, p.Pod, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create pod %s: %w", p.Pod.Name, err)
		}
	}
	return pods, nil
}

// Row is one line of the placement table.
type Row struct {
	Pod, Node, Zone, Reason string
	Expected                bool // the pod's state is the expected one
	WantPlaced              bool
}

// Settle waits until every pod expected to be placed is bound and every
// other pod has been rejected at least once (or the timeout passes), and
// returns the placement table.
func Settle(ctx context.Context, c kubernetes.Interface, pods []Pod, timeout time.Duration) ([]Row, error) {
	deadline := time.Now().Add(timeout)
	zones := map[string]string{}
	for _, s := range nodes {
		zones[s.name] = s.zone
	}
	for {
		list, err := c.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		byName := map[string]*v1.Pod{}
		for i := range list.Items {
			byName[list.Items[i].Name] = &list.Items[i]
		}
		rows := make([]Row, 0, len(pods))
		done := true
		for _, want := range pods {
			got := byName[want.Pod.Name]
			r := Row{Pod: want.Pod.Name, WantPlaced: want.Placed}
			if got != nil && got.Spec.NodeName != "" {
				r.Node, r.Zone = got.Spec.NodeName, zones[got.Spec.NodeName]
			} else if got != nil {
				r.Reason = pendingReason(got)
			}
			placed := r.Node != ""
			r.Expected = placed == want.Placed && (placed || r.Reason != "")
			if !r.Expected {
				done = false
			}
			rows = append(rows, r)
		}
		if done || time.Now().After(deadline) {
			return rows, nil
		}
		select {
		case <-ctx.Done():
			return rows, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func pendingReason(p *v1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Message != "" {
			return c.Message
		}
	}
	return ""
}

// PrintTable writes the placement table.
func PrintTable(w io.Writer, rows []Row) {
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Pod < rows[j].Pod })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tNODE\tZONE\tEXPECTED\tREASON (pending pods)")
	for _, r := range rows {
		node, zone := r.Node, r.Zone
		if node == "" {
			node, zone = "<pending>", "-"
		}
		expect := "placed"
		if !r.WantPlaced {
			expect = "pending"
		}
		if !r.Expected {
			expect += " (NOT MET)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Pod, node, zone, expect, oneLine(r.Reason))
	}
	tw.Flush()
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}

// AllExpected reports whether every row met its expectation.
func AllExpected(rows []Row) bool {
	for _, r := range rows {
		if !r.Expected {
			return false
		}
	}
	return true
}
