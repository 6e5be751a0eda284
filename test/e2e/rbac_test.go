// The chart is rendered with Helm, which needs the API machinery of the
// default minor: these tests run on it alone (make test), not in the older
// minors' smoke runs.

//go:build !k8s1.35 && !k8s1.36

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/host/lifecycle"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// schedulerAccount is the scheduler's service account the chart creates
// (release wasmsched; manifests/ is rendered from the chart).
const schedulerAccount = "system:serviceaccount:" + policyNamespace + ":wasmsched-scheduler"

// asSchedulerAccount returns a copy of cfg that acts as the scheduler's
// service account, with the groups the API server gives every service
// account token.
func asSchedulerAccount(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: schedulerAccount,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + policyNamespace, "system:authenticated"},
	}
	return cfg
}

// grants spells out rules as group/resource/verb, followed by /names when a
// rule is limited to named objects.
func grants(rules []rbacv1.PolicyRule) map[string]bool {
	m := map[string]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					key := g + "/" + res + "/" + v
					if len(r.ResourceNames) > 0 {
						key += "/" + strings.Join(r.ResourceNames, ",")
					}
					m[key] = true
				}
			}
		}
	}
	return m
}

// With RBAC enforced and the chart (charts/wasmsched) installed, the scheduler's service
// account can read the SchedulingPolicies and policy ConfigMaps in its
// namespace, write the policies' status, update the status ConfigMap and
// its own lease, and nothing else of that kind: no ConfigMap elsewhere, no
// Secret anywhere, no write to a policy's spec or bytes. A scheduler
// holding only those credentials loads a SchedulingPolicy from its chunks,
// writes its status (as the lease holder), takes its lease and binds a
// pod.
func TestLeastPrivilege(t *testing.T) {
	testwasm.Claim(t)
	cp, err := controlplane.Start(context.Background(), controlplane.Options{TB: t, Authorization: "Node,RBAC"})
	if err != nil {
		t.Fatalf("control plane: %v", err)
	}
	c := &cluster{t: t, cp: cp, client: cp.Client()}
	// The RBAC, configuration objects and CRD the chart renders, installed
	// as helm install would.
	c.installChart(nil)
	spolicies := func(cfg *rest.Config, ns string) dynamic.ResourceInterface {
		return dynamic.NewForConfigOrDie(cfg).Resource(api.GVR).Namespace(ns)
	}

	// What an attacker holding the scheduler's credentials would look for.
	ctx := context.Background()
	admin := c.client.CoreV1()
	module := testwasm.Bytes(t, "examples/nodepin")
	c.upload("nodepin", module)
	digest := c.pushModule(module)
	pin := pinSpec(digest, "two")
	c.applyPolicy("nodepin", pin)
	for _, cm := range []*v1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "app-settings", Namespace: "default"}, Data: map[string]string{"k": "v"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: policyNamespace}, Data: map[string]string{"k": "v"}},
	} {
		if _, err := admin.ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	defaultLease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler", Namespace: "kube-system"}}
	if _, err := c.client.CoordinationV1().Leases("kube-system").Create(ctx, defaultLease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"default", policyNamespace} {
		s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "credentials", Namespace: ns}, StringData: map[string]string{"password": "hunter2"}}
		if _, err := admin.Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The chart's ClusterRole is upstream's, minus its lease rules: the
	// API server holds the upstream role of this Kubernetes version.
	ours, err := c.client.RbacV1().ClusterRoles().Get(ctx, "wasmsched-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := c.client.RbacV1().ClusterRoles().Get(ctx, "system:kube-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, got := grants(upstream.Rules), grants(ours.Rules)
	for g := range want {
		if strings.HasPrefix(g, "coordination.k8s.io/") {
			delete(want, g)
		}
	}
	for g := range want {
		if !got[g] {
			t.Errorf("ClusterRole wasmsched-scheduler lacks %s, which system:kube-scheduler grants", g)
		}
	}
	for g := range got {
		if !want[g] {
			t.Errorf("ClusterRole wasmsched-scheduler grants %s, which system:kube-scheduler does not (or only for leases)", g)
		}
	}

	sa, err := kubernetes.NewForConfig(asSchedulerAccount(cp.RestConfig()))
	if err != nil {
		t.Fatal(err)
	}
	cms, secrets := sa.CoreV1().ConfigMaps, sa.CoreV1().Secrets
	chunk := source.ChunkName("nodepin", 0)
	touch := func(cm *v1.ConfigMap, err error) error {
		if err != nil {
			return err
		}
		cm.Data = map[string]string{"touched": "yes"}
		_, err = cms(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: policyNamespace}}
	otherLease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "someone-else", Namespace: policyNamespace}}
	leases := sa.CoordinationV1().Leases(policyNamespace)
	checks := []struct {
		what    string
		allowed bool
		do      func() error
	}{
		{"get a policy ConfigMap in " + policyNamespace, true, func() error {
			_, err := cms(policyNamespace).Get(ctx, chunk, metav1.GetOptions{})
			return err
		}},
		{"list ConfigMaps in " + policyNamespace, true, func() error {
			_, err := cms(policyNamespace).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list SchedulingPolicies in " + policyNamespace, true, func() error {
			_, err := spolicies(asSchedulerAccount(cp.RestConfig()), policyNamespace).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"update a SchedulingPolicy's status", true, func() error {
			sp := spolicies(asSchedulerAccount(cp.RestConfig()), policyNamespace)
			u, err := sp.Get(ctx, "nodepin", metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = sp.UpdateStatus(ctx, u, metav1.UpdateOptions{})
			return err
		}},
		{"update " + lifecycle.StatusConfigMap, true, func() error {
			return touch(cms(policyNamespace).Get(ctx, lifecycle.StatusConfigMap, metav1.GetOptions{}))
		}},
		{"update " + lifecycle.StateConfigMap, true, func() error {
			return touch(cms(policyNamespace).Get(ctx, lifecycle.StateConfigMap, metav1.GetOptions{}))
		}},
		{"create its lease " + leaseName, true, func() error {
			_, err := leases.Create(ctx, lease, metav1.CreateOptions{})
			return err
		}},
		{"update its lease", true, func() error {
			l, err := leases.Get(ctx, leaseName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
			return err
		}},

		{"update a SchedulingPolicy's spec", false, func() error {
			sp := spolicies(asSchedulerAccount(cp.RestConfig()), policyNamespace)
			u, err := spolicies(cp.RestConfig(), policyNamespace).Get(ctx, "nodepin", metav1.GetOptions{})
			if err != nil {
				return err
			}
			u.Object["spec"].(map[string]any)["weight"] = int64(7)
			_, err = sp.Update(ctx, u, metav1.UpdateOptions{})
			return err
		}},
		{"create a SchedulingPolicy", false, func() error {
			u, err := spolicies(cp.RestConfig(), policyNamespace).Get(ctx, "nodepin", metav1.GetOptions{})
			if err != nil {
				return err
			}
			u.SetName("planted")
			u.SetResourceVersion("")
			_, err = spolicies(asSchedulerAccount(cp.RestConfig()), policyNamespace).Create(ctx, u, metav1.CreateOptions{})
			return err
		}},
		{"delete a SchedulingPolicy", false, func() error {
			return spolicies(asSchedulerAccount(cp.RestConfig()), policyNamespace).Delete(ctx, "nodepin", metav1.DeleteOptions{})
		}},
		{"list SchedulingPolicies in default", false, func() error {
			_, err := spolicies(asSchedulerAccount(cp.RestConfig()), "default").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"delete a module chunk", false, func() error {
			return cms(policyNamespace).Delete(ctx, source.ChunkName(api.ModuleName(digest), 0), metav1.DeleteOptions{})
		}},
		{"update a policy ConfigMap", false, func() error {
			return touch(admin.ConfigMaps(policyNamespace).Get(ctx, chunk, metav1.GetOptions{}))
		}},
		{"update another ConfigMap in " + policyNamespace, false, func() error {
			return touch(admin.ConfigMaps(policyNamespace).Get(ctx, "other", metav1.GetOptions{}))
		}},
		{"create a ConfigMap in " + policyNamespace, false, func() error {
			_, err := cms(policyNamespace).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "planted"}}, metav1.CreateOptions{})
			return err
		}},
		{"delete a policy ConfigMap", false, func() error {
			return cms(policyNamespace).Delete(ctx, chunk, metav1.DeleteOptions{})
		}},
		{"get a ConfigMap in default", false, func() error {
			_, err := cms("default").Get(ctx, "app-settings", metav1.GetOptions{})
			return err
		}},
		{"list ConfigMaps in default", false, func() error {
			_, err := cms("default").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list ConfigMaps in kube-system", false, func() error {
			_, err := cms("kube-system").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list ConfigMaps in every namespace", false, func() error {
			_, err := cms("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"get a Secret in " + policyNamespace, false, func() error {
			_, err := secrets(policyNamespace).Get(ctx, "credentials", metav1.GetOptions{})
			return err
		}},
		{"list Secrets in " + policyNamespace, false, func() error {
			_, err := secrets(policyNamespace).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"get a Secret in default", false, func() error {
			_, err := secrets("default").Get(ctx, "credentials", metav1.GetOptions{})
			return err
		}},
		{"list Secrets in every namespace", false, func() error {
			_, err := secrets("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"get the default scheduler's lease kube-system/kube-scheduler", false, func() error {
			_, err := sa.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{})
			return err
		}},
		{"update the default scheduler's lease", false, func() error {
			l, err := c.client.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = sa.CoordinationV1().Leases("kube-system").Update(ctx, l, metav1.UpdateOptions{})
			return err
		}},
		{"create a lease in kube-system", false, func() error {
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "someone-else", Namespace: "kube-system"}}
			_, err := sa.CoordinationV1().Leases("kube-system").Create(ctx, l, metav1.CreateOptions{})
			return err
		}},
		{"create another lease", false, func() error {
			_, err := leases.Create(ctx, otherLease, metav1.CreateOptions{})
			if err == nil {
				// create cannot be limited to a name; updating it can.
				l, err := leases.Get(ctx, otherLease.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
				return err
			}
			return err
		}},
	}
	for _, ck := range checks {
		err := ck.do()
		switch {
		case ck.allowed && err != nil:
			t.Errorf("the scheduler's account cannot %s: %v", ck.what, err)
		case !ck.allowed && err == nil:
			t.Errorf("the scheduler's account can %s, want Forbidden", ck.what)
		case !ck.allowed && !apierrors.IsForbidden(err):
			t.Errorf("%s: %v, want Forbidden", ck.what, err)
		}
	}
	// The lease the checks touched would delay the scheduler below by a
	// lease duration.
	if err := c.client.CoordinationV1().Leases(policyNamespace).Delete(ctx, leaseName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// A scheduler with only those credentials.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfigFile(kubeconfig, asSchedulerAccount(cp.RestConfig())); err != nil {
		t.Fatal(err)
	}
	cfg := electedConfig(t, kubeconfig, nil, steadyLease, 0, func(cfg map[string]any) {
		selecting("2s", "nodepin")(cfg)
		args := cfg["profiles"].([]any)[0].(map[string]any)["pluginConfig"].([]any)[0].(map[string]any)["args"].(map[string]any)
		args["statusLease"] = policyNamespace + "/" + leaseName
	})
	precompile(t, module)
	r := startReplica(t, "kube-scheduler", cfg)
	c.node("one", nil)
	c.node("two", nil)
	c.pod("least-privilege")
	if node := c.waitBound("least-privilege", 120*time.Second); node != "two" {
		t.Fatalf("bound to %s, want two (the policy's choice)", node)
	}
	waitFor(t, "the scheduler takes its lease", 30*time.Second, r.leading)
	// As the lease holder it writes the shared status, and proves the
	// revision after its probation.
	c.waitPolicy("nodepin", "serving and proven", 60*time.Second, func(sp *api.SchedulingPolicy) bool {
		return servingKey(revisionKey(t, pin), metav1.ConditionTrue)(sp) && sp.Status.LastGood != nil
	})
	r.stop()
	var denied []string
	for _, l := range strings.Split(r.out.String(), "\n") {
		if strings.Contains(l, "forbidden") {
			denied = append(denied, l)
		}
	}
	if len(denied) > 0 {
		t.Errorf("the scheduler was refused requests it needs:\n%s", strings.Join(denied, "\n"))
	}
}
