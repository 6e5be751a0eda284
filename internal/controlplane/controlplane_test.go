package controlplane

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

func TestControlPlane(t *testing.T) {
	ctx := t.Context()
	start := time.Now()
	cp, err := Start(ctx, Options{TB: t})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	t.Logf("control plane up in %v", time.Since(start))

	c := cp.Client()
	if _, err := c.CoreV1().Nodes().Create(ctx, testNode("node-a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods("default").Create(ctx, testPod("pod-a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := c.CoreV1().Pods("default").Get(ctx, "pod-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "" {
		t.Errorf("pod bound to %q without a scheduler", pod.Spec.NodeName)
	}

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := fromFile.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 || nodes.Items[0].Name != "node-a" {
		t.Errorf("nodes through the kubeconfig = %v, want [node-a]", nodes.Items)
	}
}

func TestRBAC(t *testing.T) {
	ctx := t.Context()
	cp, err := Start(ctx, Options{TB: t, Authorization: "Node,RBAC"})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	if _, err := cp.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("admin: %v", err)
	}

	cfg := cp.RestConfig()
	cfg.Impersonate.UserName = "system:serviceaccount:default:nobody"
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := WriteKubeconfigFile(kubeconfig, cfg); err != nil {
		t.Fatal(err)
	}
	cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	nobody, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = nobody.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("listing nodes as nobody: err = %v, want Forbidden", err)
	}
}

func TestScheduler(t *testing.T) {
	ctx := t.Context()
	cp, err := Start(ctx, Options{TB: t})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	// What the scheduler logs while it starts: no error that is noise
	// (wasmsched-up's log showed one on every start).
	var logs syncBuffer
	klog.LogToStderr(false)
	klog.SetOutput(&logs)
	sched, err := StartScheduler(ctx, SchedulerOptions{Kubeconfig: kubeconfig})
	klog.Flush()
	klog.SetOutput(os.Stderr)
	klog.LogToStderr(true)
	if err != nil {
		t.Fatal(err)
	}
	defer sched.Stop()
	if s := logs.String(); strings.Contains(s, "The manifest file is empty") || strings.Contains(s, "allow-list") {
		t.Errorf("the scheduler logged at start-up:\n%s", s)
	}

	c := cp.Client()
	if _, err := c.CoreV1().Nodes().Create(ctx, testNode("node-a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	if _, err := c.CoreV1().Pods("default").Create(ctx, testPod("pod-a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		pod, err := c.CoreV1().Pods("default").Get(ctx, "pod-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Spec.NodeName == "node-a" {
			t.Logf("pod bound %v after creation", time.Since(created))
			break
		}
		if time.Since(created) > 30*time.Second {
			t.Fatalf("pod not bound within 30s (nodeName %q, conditions %v)", pod.Spec.NodeName, pod.Status.Conditions)
		}
		select {
		case <-sched.Done():
			t.Fatalf("scheduler stopped: %v", sched.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}

	sched.Stop()
	if err := sched.Err(); err != nil {
		t.Errorf("scheduler: %v", err)
	}
}

func testNode(name string) *v1.Node {
	capacity := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("4"),
		v1.ResourceMemory: resource.MustParse("8Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: v1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	}
}

func testPod(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name:  "app",
				Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU:    resource.MustParse("100m"),
					v1.ResourceMemory: resource.MustParse("64Mi"),
				}},
			}},
		},
	}
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of klog.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
