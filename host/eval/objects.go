package eval

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/wasmsched/wasmsched/host/clusterctx"
)

// ResourceAnnotation on an object in an --objects file names its resource
// (the plural the API serves) when the lower-case plural of its kind is
// not it.
const ResourceAnnotation = "wasmsched.io/resource"

// builtinResources are the resources of built-in kinds whose plural is not
// the lower-case kind plus "s", and those a reader would look up.
var builtinResources = map[string]string{
	"Namespace":           "namespaces",
	"PriorityClass":       "priorityclasses",
	"ResourceSlice":       "resourceslices",
	"ResourceClaim":       "resourceclaims",
	"DeviceClass":         "deviceclasses",
	"Node":                "nodes",
	"Pod":                 "pods",
	"ConfigMap":           "configmaps",
	"Endpoints":           "endpoints",
	"PersistentVolume":    "persistentvolumes",
	"StorageClass":        "storageclasses",
	"ResourceQuota":       "resourcequotas",
	"LimitRange":          "limitranges",
	"Ingress":             "ingresses",
	"NetworkPolicy":       "networkpolicies",
	"PodDisruptionBudget": "poddisruptionbudgets",
}

// Resource returns the resource an object of kind is served as: the
// object's ResourceAnnotation when set, a built-in kind's by table, else
// the lower-case kind made plural as the API server's default does
// (…y → …ies after a consonant; …s, …x, …z, …ch, …sh → …es; else …s):
// ElasticQuota → elasticquotas, NodeResourceTopology →
// noderesourcetopologies.
func Resource(kind string, annotations map[string]string) string {
	if r := annotations[ResourceAnnotation]; r != "" {
		return r
	}
	if r, ok := builtinResources[kind]; ok {
		return r
	}
	k := strings.ToLower(kind)
	switch {
	case strings.HasSuffix(k, "y") && len(k) > 1 && !strings.ContainsRune("aeiou", rune(k[len(k)-2])):
		return k[:len(k)-1] + "ies"
	case strings.HasSuffix(k, "s"), strings.HasSuffix(k, "x"), strings.HasSuffix(k, "z"), strings.HasSuffix(k, "ch"), strings.HasSuffix(k, "sh"):
		return k + "es"
	}
	return k + "s"
}

// KindOf returns the kind (group, version, resource) of an object read
// from an --objects file.
func KindOf(u *unstructured.Unstructured) (clusterctx.Kind, error) {
	gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
	if err != nil || gv.Version == "" || u.GetKind() == "" {
		return clusterctx.Kind{}, fmt.Errorf("%s: apiVersion %q and kind %q do not name a kind", objectName(u), u.GetAPIVersion(), u.GetKind())
	}
	return clusterctx.Kind{Group: gv.Group, Version: gv.Version, Resource: Resource(u.GetKind(), u.GetAnnotations())}, nil
}

func objectName(u *unstructured.Unstructured) string {
	if u.GetNamespace() != "" {
		return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
	}
	return u.GetKind() + " " + u.GetName()
}

// ReadObjects reads cluster objects of any kinds from a file of YAML or
// JSON documents, or Lists: what `wasmsched eval --objects` gives the
// policies that read cluster context.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseObjects(path, data)
}

// ParseObjects reads objects as ReadObjects does from a file; path names
// them in errors. Every object needs apiVersion, kind and metadata.name; a
// missing uid or resourceVersion is made up (uid-<namespace>-<name>, "1"),
// as an API server would have set them.
func ParseObjects(path string, data []byte) ([]*unstructured.Unstructured, error) {
	docs, err := parseObjects(path, data, "")
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(docs))
	seen := map[string]string{}
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(d.raw, &u.Object); err != nil {
			return nil, fmt.Errorf("%s: %s: %v", path, d.where, err)
		}
		if u.GetName() == "" {
			return nil, fmt.Errorf("%s: %s: %s has no metadata.name", path, d.where, u.GetKind())
		}
		k, err := KindOf(u)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %v", path, d.where, err)
		}
		var meta metav1.ObjectMeta
		if m, ok := u.Object["metadata"].(map[string]any); ok {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &meta); err != nil {
				return nil, fmt.Errorf("%s: %s: metadata: %v", path, d.where, err)
			}
		}
		if err := validateMeta(path, d.where, u.GetKind(), &meta, meta.Namespace != ""); err != nil {
			return nil, err
		}
		id := k.String() + " " + u.GetNamespace() + "/" + u.GetName()
		if prev, ok := seen[id]; ok {
			return nil, fmt.Errorf("%s: %s: %s is also %s", path, d.where, objectName(u), prev)
		}
		seen[id] = d.where
		if u.GetUID() == "" {
			u.SetUID(types.UID("uid-" + u.GetNamespace() + "-" + u.GetName()))
		}
		if u.GetResourceVersion() == "" {
			u.SetResourceVersion("1")
		}
		out = append(out, u)
	}
	return out, nil
}

// asInformerObject returns u as the scheduler's informers would hand it to
// the host: a typed object without apiVersion and kind for the kinds
// client-go's scheme knows (so it encodes to the same JSON), else u.
func asInformerObject(u *unstructured.Unstructured) (runtime.Object, error) {
	gvk := u.GroupVersionKind()
	typed, err := scheme.Scheme.New(gvk)
	if err != nil {
		return u, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
		return nil, fmt.Errorf("%s: %v", objectName(u), err)
	}
	typed.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return typed, nil
}

// evalContext is what an Evaluator's policies read: a store per kind
// declared (shared between policies), tenant usage, and what the last
// Evaluate put there, so the next one replaces it.
type evalContext struct {
	stores map[clusterctx.Kind]*clusterctx.Store
	usage  *clusterctx.Usage
	last   map[clusterctx.Kind]map[[2]string]bool
	pods   map[types.UID]*v1.Pod
}

// bindContext gives each policy that declared context its stores and usage.
func (e *Evaluator) bindContext() error {
	for _, p := range e.policies {
		info := p.Info()
		kinds := p.ContextKinds()
		if len(kinds) == 0 && !info.GetWantsNamespaceUsage() && len(info.GetUsageLabelKeys()) == 0 {
			continue
		}
		if e.ctx == nil {
			e.ctx = &evalContext{stores: map[clusterctx.Kind]*clusterctx.Store{}, usage: clusterctx.NewUsage(),
				last: map[clusterctx.Kind]map[[2]string]bool{}, pods: map[types.UID]*v1.Pod{}}
		}
		b := &clusterctx.Binding{Usage: e.ctx.usage, Namespaces: info.GetWantsNamespaceUsage(), LabelKeys: info.GetUsageLabelKeys()}
		for _, k := range kinds {
			if err := clusterctx.Forbidden(k); err != nil {
				return fmt.Errorf("policy %s: %w", p.Name(), err)
			}
			s := e.ctx.stores[k]
			if s == nil {
				s = clusterctx.NewStore(k)
				e.ctx.stores[k] = s
			}
			b.Stores = append(b.Stores, s)
		}
		for _, key := range b.LabelKeys {
			e.ctx.usage.WatchKey(key)
		}
		if err := p.Bind(b); err != nil {
			return err
		}
	}
	return nil
}

// setContext makes the stores hold exactly in.Objects of their kinds
// (objects of kinds no policy reads are left out, as the scheduler never
// watches them) and the usage count exactly in.Pods.
func (e *Evaluator) setContext(in Input) error {
	c := e.ctx
	if c == nil {
		return nil
	}
	now := map[clusterctx.Kind]map[[2]string]bool{}
	for _, u := range in.Objects {
		k, err := KindOf(u)
		if err != nil {
			return err
		}
		s := c.stores[k]
		if s == nil || clusterctx.Forbidden(k) != nil {
			continue
		}
		obj, err := asInformerObject(u)
		if err != nil {
			return err
		}
		if err := s.Set(obj); err != nil {
			return err
		}
		if now[k] == nil {
			now[k] = map[[2]string]bool{}
		}
		now[k][[2]string{u.GetNamespace(), u.GetName()}] = true
	}
	for k, keys := range c.last {
		for key := range keys {
			if !now[k][key] {
				c.stores[k].Delete(key[0], key[1])
			}
		}
	}
	c.last = now
	pods := map[types.UID]*v1.Pod{}
	for _, p := range in.Pods {
		c.usage.Set(p)
		pods[p.UID] = p
	}
	for uid, p := range c.pods {
		if pods[uid] == nil {
			c.usage.Delete(p)
		}
	}
	c.pods = pods
	return nil
}
