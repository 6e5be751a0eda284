package explain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmsched/wasmsched/host/clusterctx"
	"github.com/wasmsched/wasmsched/host/eval"
)

// MaxNodes bounds the nodes one explanation reads and evaluates: five
// times upstream's largest scale target (5000 nodes), so that a real
// cluster fits and a runaway one is refused with a message rather than
// exhausting the CLI's memory.
const MaxNodes = 25000

// MaxPods bounds the pods read (placed and pending), for the same reason:
// upstream's 5000-node target runs 30 pods a node.
const MaxPods = 250000

// listPage is the page size of every list: the API server answers in
// pages of this many objects, so a large cluster is never one response.
const listPage = 500

// Cluster is the cluster as the scheduler's snapshot would hold it: the
// nodes sorted by name (ties go to the first by name) and every pod not
// terminated, placed or not.
type Cluster struct {
	Nodes []*v1.Node
	Pods  []*v1.Pod
}

// Client is what explain reads the cluster with.
type Client struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Namespace holds the SchedulingPolicies and their module chunks.
	Namespace string
	// MaxNodes, when positive, lowers the MaxNodes bound.
	MaxNodes int
}

func (c *Client) maxNodes() int {
	if c.MaxNodes > 0 {
		return min(c.MaxNodes, MaxNodes)
	}
	return MaxNodes
}

// ReadCluster lists the nodes and pods, page by page, refusing more than
// MaxNodes nodes or MaxPods pods.
func (c *Client) ReadCluster(ctx context.Context) (*Cluster, error) {
	out := &Cluster{}
	opts := metav1.ListOptions{Limit: listPage}
	for {
		nl, err := c.Kube.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, Rights(err, "list", "nodes", "")
		}
		for i := range nl.Items {
			out.Nodes = append(out.Nodes, &nl.Items[i])
		}
		if limit := c.maxNodes(); len(out.Nodes) > limit {
			return nil, fmt.Errorf("the cluster has more than %d nodes, more than explain evaluates at once (its bound)", limit)
		}
		if opts.Continue = nl.Continue; opts.Continue == "" {
			break
		}
	}
	slices.SortFunc(out.Nodes, func(a, b *v1.Node) int { return strings.Compare(a.Name, b.Name) })
	opts = metav1.ListOptions{Limit: listPage}
	for {
		pl, err := c.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return nil, Rights(err, "list", "pods", "")
		}
		for i := range pl.Items {
			p := &pl.Items[i]
			if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
				continue
			}
			out.Pods = append(out.Pods, p)
		}
		if len(out.Pods) > MaxPods {
			return nil, fmt.Errorf("the cluster has more than %d pods, more than explain reads (MaxPods)", MaxPods)
		}
		if opts.Continue = pl.Continue; opts.Continue == "" {
			break
		}
	}
	slices.SortFunc(out.Pods, func(a, b *v1.Pod) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out, nil
}

// Pod finds a pod of the cluster.
func (cl *Cluster) Pod(namespace, name string) *v1.Pod {
	for _, p := range cl.Pods {
		if p.Namespace == namespace && p.Name == name {
			return p
		}
	}
	return nil
}

// input is what the scheduler would see deciding pod: the nodes, the
// pods placed on them except pod itself, and pod as if unplaced.
func (cl *Cluster) input(pod *v1.Pod, objects []*unstructured.Unstructured) eval.Input {
	known := make(map[string]bool, len(cl.Nodes))
	for _, n := range cl.Nodes {
		known[n.Name] = true
	}
	in := eval.Input{Nodes: cl.Nodes, Objects: objects, Detail: true}
	for _, p := range cl.Pods {
		if p.UID == pod.UID && p.Namespace == pod.Namespace && p.Name == pod.Name {
			continue
		}
		if p.Spec.NodeName != "" && known[p.Spec.NodeName] {
			in.Pods = append(in.Pods, p)
		}
	}
	unplaced := pod.DeepCopy()
	unplaced.Spec.NodeName = ""
	in.Pod = unplaced
	return in
}

// readObjects lists the objects of the kinds the policies declared they
// read, as the scheduler's informers would hold them.
func (c *Client) readObjects(ctx context.Context, kinds []clusterctx.Kind) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, k := range kinds {
		if err := clusterctx.Forbidden(k); err != nil {
			continue // the scheduler never reads them either
		}
		gvr := schema.GroupVersionResource{Group: k.Group, Version: k.Version, Resource: k.Resource}
		opts := metav1.ListOptions{Limit: listPage}
		for {
			l, err := c.Dynamic.Resource(gvr).List(ctx, opts)
			if apierrors.IsNotFound(err) {
				break // not served: the scheduler's informer would hold nothing
			}
			if err != nil {
				res := k.Resource
				if k.Group != "" {
					res += "." + k.Group // as RBAC names it
				}
				return nil, Rights(err, "list", res, "")
			}
			for i := range l.Items {
				u := &l.Items[i]
				ann := u.GetAnnotations()
				if ann == nil {
					ann = map[string]string{}
				}
				ann[eval.ResourceAnnotation] = k.Resource
				u.SetAnnotations(ann)
				out = append(out, u)
			}
			if opts.Continue = l.GetContinue(); opts.Continue == "" {
				break
			}
		}
	}
	return out, nil
}

// RightsError is a request the kubeconfig's user may not make: it names
// the right that is missing.
type RightsError struct {
	Verb, Resource, Namespace string
	Err                       error
}

func (e *RightsError) Error() string {
	where := "at cluster scope"
	if e.Namespace != "" {
		where = "in namespace " + e.Namespace
	}
	return fmt.Sprintf("the kubeconfig's user may not %s %s %s: it needs the right to %s %s (%v)", e.Verb, e.Resource, where, e.Verb, e.Resource, e.Err)
}

func (e *RightsError) Unwrap() error { return e.Err }

// Rights turns a Forbidden or Unauthorized answer into a *RightsError
// naming verb and resource; other errors are wrapped with what was done.
func Rights(err error, verb, resource, namespace string) error {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return &RightsError{Verb: verb, Resource: resource, Namespace: namespace, Err: err}
	}
	where := ""
	if namespace != "" {
		where = " in " + namespace
	}
	return fmt.Errorf("%s %s%s: %w", verb, resource, where, err)
}

// IsRights reports whether err is a missing right.
func IsRights(err error) bool {
	var r *RightsError
	return errors.As(err, &r)
}

// ReadPod reads one pod; a pod that does not exist is an error saying so.
func (c *Client) ReadPod(ctx context.Context, namespace, name string) (*v1.Pod, error) {
	p, err := c.Kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("pod %s/%s not found", namespace, name)
	}
	if err != nil {
		return nil, Rights(err, "get", "pods", namespace)
	}
	return p, nil
}
