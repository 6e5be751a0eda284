package main

// newCycle gives a native test's cycle cluster objects and tenant usage
// through Cycle.ApplyContext, as the host's sync does. (To become
// guesttest.MakeCluster once the SDK has it.)

import (
	"slices"
	"strings"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
	"github.com/wasmsched/wasmsched/guest/guesttest"
	"sigs.k8s.io/yaml"
)

// newCycle is a cycle of pod over nodes that sees cl's objects (of the
// kinds p reads) and usage.
func newCycle(t *testing.T, p *Policy, cl cluster, pod *guest.Pod, nodes ...*guest.NodeInfo) *guest.Cycle {
	t.Helper()
	c := guesttest.NewCycle(pod, nodes...)
	kinds := p.Kinds()
	m := &abiv1.NodeSync{}
	for _, y := range cl.objects {
		js, err := yaml.YAMLToJSON([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		k := KindElasticQuota
		if strings.Contains(string(js), `"kind":"Namespace"`) {
			k = guest.KindNamespace
		}
		i := slices.Index(kinds, k)
		if i < 0 {
			continue
		}
		v := guest.ParseValue(js)
		o := &abiv1.ContextObject{Kind: int32(i), Json: js}
		o.Namespace, _ = v.Get("metadata", "namespace").String()
		o.Name, _ = v.Get("metadata", "name").String()
		o.ResourceVersion, _ = v.Get("metadata", "resourceVersion").String()
		lm := map[string]string{}
		v.Get("metadata", "labels").Each(func(k string, x guest.Value) bool { lm[k], _ = x.String(); return true })
		o.Labels = guesttest.KeyValues(lm)
		m.Objects = append(m.Objects, o)
	}
	for ns, u := range cl.usage {
		r := guesttest.Resources(u)
		if r == nil {
			r = &abiv1.Resources{}
		}
		r.Pods = 1
		m.TenantUsage = append(m.TenantUsage, &abiv1.TenantUsage{Tenant: ns, Requested: r})
	}
	if err := c.ApplyContext(kinds, m); err != nil {
		t.Fatal(err)
	}
	return c
}
