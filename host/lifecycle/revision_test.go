package lifecycle

import (
	"strings"
	"testing"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// elasticQuotas is scheduler-plugins' ElasticQuota.
const elasticQuotas = "scheduling.x-k8s.io/v1alpha1/elasticquotas"

// A SchedulingPolicy's spec.context is its slot's allow-list, and a
// revision loads with the allow-list it was recorded with (a fallback to
// the last good revision is checked against what that revision allowed).
func TestSchedulingPolicyContext(t *testing.T) {
	sp := &api.SchedulingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "quota"},
		Spec: api.SchedulingPolicySpec{Module: api.Module{SHA256: strings.Repeat("a", 64)}, Context: []string{"v1/namespaces", elasticQuotas}}}
	if got := argsOf(sp).Context; len(got) != 2 || got[1] != elasticQuotas {
		t.Fatalf("argsOf: context %q", got)
	}
	old := api.RevisionOf(&api.SchedulingPolicySpec{Module: sp.Spec.Module, Context: []string{"v1/namespaces"}})
	e := &entry{sp: sp, c: &catalog{store: &crdStore{}}}
	if got := e.revisionArgs(old).Context; len(got) != 1 || got[0] != "v1/namespaces" {
		t.Fatalf("revisionArgs: context %q, want the revision's", got)
	}
	if old.Key == api.RevisionOf(&sp.Spec).Key {
		t.Fatal("a change of context is not a new revision")
	}
}
