package demo

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/host/lifecycle"
	"github.com/wasmsched/wasmsched/host/plugin"
)

// DescribeProfiles says, a line per scheduler profile that enables
// WasmPolicy, which policies the profile runs: the SchedulingPolicies it
// selects (by label, with the push flag that matches, or by name), or its
// static policies. cfg is a KubeSchedulerConfiguration.
func DescribeProfiles(cfg []byte) ([]string, error) {
	var c struct {
		Profiles []struct {
			SchedulerName string `json:"schedulerName"`
			PluginConfig  []struct {
				Name string         `json:"name"`
				Args lifecycle.Args `json:"args"`
			} `json:"pluginConfig"`
		} `json:"profiles"`
	}
	if err := yaml.Unmarshal(cfg, &c); err != nil {
		return nil, fmt.Errorf("scheduler configuration: %w", err)
	}
	var out []string
	for _, p := range c.Profiles {
		name := p.SchedulerName
		if name == "" {
			name = "default-scheduler"
		}
		for _, pc := range p.PluginConfig {
			if pc.Name != plugin.Name {
				continue
			}
			out = append(out, fmt.Sprintf("profile %s runs %s", name, describeArgs(&pc.Args)))
		}
	}
	return out, nil
}

func describeArgs(a *lifecycle.Args) string {
	ns := a.Namespace
	if ns == "" {
		ns = PolicyNamespace
	}
	sel := a.SchedulingPolicies
	switch {
	case sel == nil:
		names := make([]string, len(a.Policies))
		for i, p := range a.Policies {
			names[i] = p.Name
		}
		return "its static policies " + strings.Join(names, ", ")
	case len(sel.Names) > 0:
		return fmt.Sprintf("the SchedulingPolicies of %s named %s", ns, strings.Join(sel.Names, ", "))
	case sel.Selector == nil:
		return "no SchedulingPolicy"
	}
	s := fmt.Sprintf("the SchedulingPolicies of %s labelled %s", ns, metav1.FormatLabelSelector(sel.Selector))
	if len(sel.Selector.MatchExpressions) == 0 && len(sel.Selector.MatchLabels) > 0 {
		keys := make([]string, 0, len(sel.Selector.MatchLabels))
		for k := range sel.Selector.MatchLabels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		flags := []string{"--namespace " + ns}
		for _, k := range keys {
			flags = append(flags, "--label "+k+"="+sel.Selector.MatchLabels[k])
		}
		s += " (wasmsched push P.wasm --name N " + strings.Join(flags, " ") + " adds one)"
	}
	return s
}
