package guesttest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
)

// ClusterWrapper describes the cluster objects and tenant usage the host
// syncs into a policy that sets Policy.Context, Policy.NamespaceUsage or
// Policy.UsageLabelKeys. Its setters return the wrapper, so calls chain;
// Cycle makes a cycle that reads them. It is not safe for concurrent use.
//
//	c := guesttest.MakeCluster().
//		Objects(t, "testdata/quotas.yaml").
//		Object(`{apiVersion: v1, kind: Namespace, metadata: {name: ml, labels: {tenant: blue}}}`).
//		Usage("", "ml", map[string]string{"cpu": "6", "nvidia.com/gpu": "2"}, 3).
//		Cycle(pod, policy.Context, nodes...)
type ClusterWrapper struct {
	objects []clusterObject
	usage   map[tenantKey]*abiv1.Resources
}

type clusterObject struct {
	kind guest.Kind
	msg  *abiv1.ContextObject
}

type tenantKey struct{ key, tenant string }

// MakeCluster starts a cluster with no objects and no usage.
func MakeCluster() *ClusterWrapper { return &ClusterWrapper{usage: map[tenantKey]*abiv1.Resources{}} }

// Object adds the objects of a YAML (or JSON) text: one or more documents
// separated by ---, each a Kubernetes object of any kind or a List of
// them, as in a file `wasmsched eval --objects` reads. It panics on a
// text that is no such thing: the text is the test's own.
func (c *ClusterWrapper) Object(text string) *ClusterWrapper {
	if err := c.add("object", []byte(text)); err != nil {
		panic("guesttest: " + err.Error())
	}
	return c
}

// Objects adds the objects of a file, as Object reads a text (the file
// `wasmsched eval --objects` reads), and fails t if it cannot.
func (c *ClusterWrapper) Objects(t testing.TB, path string) *ClusterWrapper {
	t.Helper()
	data, err := os.ReadFile(path)
	if err == nil {
		err = c.add(path, data)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Usage sets what the pods of a tenant request, as the host counts it:
// with an empty key the tenant is a namespace, otherwise a value of that
// pod label key. requests are Kubernetes quantities by resource name
// ({"cpu": "1500m", "memory": "4Gi", "nvidia.com/gpu": "2"}); pods is the
// number of pods, and a tenant without pods has no usage, as on the wire.
// It panics on a malformed quantity.
func (c *ClusterWrapper) Usage(key, tenant string, requests map[string]string, pods int) *ClusterWrapper {
	amounts := map[string]int64{}
	for name, q := range requests {
		v, err := guest.ParseQuantity(q, name)
		if err != nil {
			panic(fmt.Sprintf("guesttest: usage of %s: %s: %v", tenant, name, err))
		}
		amounts[name] = v
	}
	r := Resources(amounts)
	if r == nil {
		r = &abiv1.Resources{}
	}
	r.Pods = int64(pods)
	c.usage[tenantKey{key, tenant}] = r
	return c
}

// UsageFromPods adds the pods to the usage of their namespace and of the
// value of each of their labels, as the host counts bound and assumed
// pods: their requests summed, one pod each.
func (c *ClusterWrapper) UsageFromPods(pods ...*abiv1.PodSummary) *ClusterWrapper {
	for _, p := range pods {
		c.addUsage(tenantKey{"", p.GetNamespace()}, p.GetRequests())
		for _, l := range p.GetLabels() {
			c.addUsage(tenantKey{l.GetKey(), l.GetValue()}, p.GetRequests())
		}
	}
	return c
}

func (c *ClusterWrapper) addUsage(k tenantKey, req *abiv1.Resources) {
	r := c.usage[k]
	if r == nil {
		r = &abiv1.Resources{}
		c.usage[k] = r
	}
	r.MilliCpu += req.GetMilliCpu()
	r.Memory += req.GetMemory()
	r.EphemeralStorage += req.GetEphemeralStorage()
	r.Pods++
	for _, s := range req.GetScalars() {
		if i := slices.IndexFunc(r.Scalars, func(x *abiv1.Scalar) bool { return x.Name == s.GetName() }); i >= 0 {
			r.Scalars[i].Value += s.GetValue()
		} else {
			r.Scalars = append(r.Scalars, &abiv1.Scalar{Name: s.GetName(), Value: s.GetValue()})
		}
	}
	slices.SortFunc(r.Scalars, func(a, b *abiv1.Scalar) int { return strings.Compare(a.Name, b.Name) })
}

// Sync returns the NodeSync the host would send first to a policy that
// declares kinds (Policy.Context): every object of those kinds, indexed
// against kinds, in the order added (a later object of the same kind,
// namespace and name replaces an earlier one), then the tenant usage,
// sorted by key and tenant. Objects of other kinds are left out, as the
// host never sends them. Cycle applies it; Cycle.ApplyContext applies a
// later one (a changed quota, say).
func (c *ClusterWrapper) Sync(kinds []guest.Kind) *abiv1.NodeSync {
	m := &abiv1.NodeSync{}
	for _, o := range c.objects {
		i := slices.Index(kinds, o.kind)
		if i < 0 {
			continue
		}
		m.Objects = append(m.Objects, &abiv1.ContextObject{Kind: int32(i), Namespace: o.msg.Namespace, Name: o.msg.Name,
			Uid: o.msg.Uid, ResourceVersion: o.msg.ResourceVersion, Labels: o.msg.Labels, Json: o.msg.Json})
	}
	for k, r := range c.usage {
		m.TenantUsage = append(m.TenantUsage, &abiv1.TenantUsage{Key: k.key, Tenant: k.tenant, Requested: r})
	}
	slices.SortFunc(m.TenantUsage, func(a, b *abiv1.TenantUsage) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return strings.Compare(a.Tenant, b.Tenant)
	})
	return m
}

// Cycle returns a cycle of pod over nodes, as NewCycle does, whose
// Objects, typed views and TenantUsage read the cluster as a policy that
// declares kinds (its Policy.Context) would: Sync(kinds) applied with
// guest's Cycle.ApplyContext.
func (c *ClusterWrapper) Cycle(pod *guest.Pod, kinds []guest.Kind, nodes ...*guest.NodeInfo) *guest.Cycle {
	cy := guest.NewCycle(pod, nodes)
	if err := cy.ApplyContext(kinds, c.Sync(kinds)); err != nil {
		panic("guesttest: " + err.Error())
	}
	return cy
}

// add reads the objects of a YAML text.
func (c *ClusterWrapper) add(source string, data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for doc := 1; ; doc++ {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return nil
		}
		where := fmt.Sprintf("%s: document %d", source, doc)
		if err != nil {
			return fmt.Errorf("%s: not valid YAML: %v", where, err)
		}
		if v == nil {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: not a Kubernetes object", where)
		}
		if kind, _ := m["kind"].(string); strings.HasSuffix(kind, "List") {
			items, _ := m["items"].([]any)
			for i, item := range items {
				im, ok := item.(map[string]any)
				if !ok {
					return fmt.Errorf("%s item %d: not a Kubernetes object", where, i+1)
				}
				if err := c.addObject(fmt.Sprintf("%s item %d", where, i+1), im); err != nil {
					return err
				}
			}
			continue
		}
		if err := c.addObject(where, m); err != nil {
			return err
		}
	}
}

// addObject converts one object as the host does: its kind from
// apiVersion and kind, metadata.managedFields left out, apiVersion and
// kind left out of the JSON for the built-in API groups (the host
// marshals their typed objects, which carry neither).
func (c *ClusterWrapper) addObject(where string, m map[string]any) error {
	apiVersion, _ := m["apiVersion"].(string)
	kindName, _ := m["kind"].(string)
	if apiVersion == "" || kindName == "" {
		return fmt.Errorf("%s: an object needs apiVersion and kind", where)
	}
	kind := KindOf(apiVersion, kindName)
	md, _ := m["metadata"].(map[string]any)
	str := func(k string) string { s, _ := md[k].(string); return s }
	if str("name") == "" {
		return fmt.Errorf("%s: %s has no metadata.name", where, kindName)
	}
	if md != nil {
		delete(md, "managedFields")
	}
	if builtinGroup(kind.Group) {
		delete(m, "apiVersion")
		delete(m, "kind")
	}
	js, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("%s: not a Kubernetes object: %v", where, err)
	}
	labels := map[string]string{}
	if ls, ok := md["labels"].(map[string]any); ok {
		for k, v := range ls {
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("%s: label %s is not a string", where, k)
			}
			labels[k] = s
		}
	}
	annotations := map[string]string{}
	if as, ok := md["annotations"].(map[string]any); ok {
		for k, v := range as {
			s, _ := v.(string)
			annotations[k] = s
		}
	}
	if err := checkMeta(kindName, str("name"), str("namespace"), labels, annotations); err != nil {
		return fmt.Errorf("%s: %v", where, err)
	}
	c.objects = append(c.objects, clusterObject{kind: kind, msg: &abiv1.ContextObject{
		Namespace: str("namespace"), Name: str("name"), Uid: str("uid"), ResourceVersion: str("resourceVersion"),
		Labels: KeyValues(labels), Json: js,
	}})
	return nil
}

// KindOf returns the kind (group, version, resource) of objects of an
// apiVersion and kind, the resource guessed as Kubernetes' RESTMapper
// guesses it: the kind in lower case and in the plural, "y" becoming
// "ies" and "s" gaining "es" ("Namespace" is "namespaces",
// "PriorityClass" "priorityclasses", "NodeResourceTopology"
// "noderesourcetopologies"). The built-in kinds and ElasticQuota come out
// right; name a custom resource whose plural is irregular in its
// Policy.Context as its CRD spells it, and give its objects a kind whose
// guess matches.
func KindOf(apiVersion, kind string) guest.Kind {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group, version = "", apiVersion
	}
	r := strings.ToLower(kind)
	switch {
	case strings.HasSuffix(r, "endpoints"):
	case strings.HasSuffix(r, "s"):
		r += "es"
	case strings.HasSuffix(r, "y"):
		r = strings.TrimSuffix(r, "y") + "ies"
	default:
		r += "s"
	}
	return guest.Kind{Group: group, Version: version, Resource: r}
}

// builtinGroup reports whether objects of an API group come to the host
// through typed informers (the core group, the unqualified groups such as
// apps, and the *.k8s.io groups Kubernetes itself serves), rather than as
// unstructured custom resources.
func builtinGroup(group string) bool {
	if group == "" || !strings.Contains(group, ".") {
		return true
	}
	for _, g := range []string{"scheduling", "resource", "storage", "networking", "node", "coordination", "discovery",
		"rbac.authorization", "admissionregistration", "apiextensions", "certificates", "events", "flowcontrol.apiserver",
		"internal.apiserver", "storagemigration", "authentication", "authorization", "apiregistration"} {
		if group == g+".k8s.io" {
			return true
		}
	}
	return false
}
