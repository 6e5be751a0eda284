package chart

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The trust policy's keys reach the scheduler's arguments, and the
// scheduler may get exactly the Secrets named (key Secrets and pull
// secrets), nothing else; a key naming neither a ConfigMap nor a Secret is
// refused.
func TestTrustValues(t *testing.T) {
	r, err := render(t, `
trust:
  keys:
  - {name: release-a, configMap: wasmsched-keys, key: a.pub}
  - {name: release-b, secret: release-b-key}
pullSecrets: [regcred]
`)
	if err != nil {
		t.Fatal(err)
	}
	var rules string
	for _, role := range r.Kind("Role") {
		if role.GetName() == "wasmsched-scheduler" {
			b, _ := yaml.Marshal(role.Object["rules"])
			rules = string(b)
		}
	}
	want := `- apiGroups:
  - ""
  resourceNames:
  - release-b-key
  - regcred
  resources:
  - secrets
  verbs:
  - get
`
	if !strings.HasSuffix(rules, want) || strings.Count(rules, "secrets") != 1 {
		t.Errorf("Role rules:\n%s\nwant them to end with:\n%s", rules, want)
	}
	cfg := r.Templates["templates/config.yaml"]
	for _, w := range []string{"trust:\n            mode: Required\n            keys:", "- configMap: wasmsched-keys\n                key: a.pub\n                name: release-a", "- name: release-b\n                secret: release-b-key"} {
		if !strings.Contains(cfg, w) {
			t.Errorf("config.yaml does not hold %q:\n%s", w, cfg)
		}
	}
	def, err := render(t, ``)
	if err != nil {
		t.Fatal(err)
	}
	if c := def.Templates["templates/config.yaml"]; strings.Contains(c, "trust:") {
		t.Error("the default values configure a trust policy")
	}
	if _, err := render(t, `trust: {keys: [{name: k}]}`); err == nil || !strings.Contains(err.Error(), "trust") {
		t.Errorf("a key in neither a ConfigMap nor a Secret: %v", err)
	}
}
