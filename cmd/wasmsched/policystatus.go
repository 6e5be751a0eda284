package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
)

// printPolicies prints SchedulingPolicies as a table: a line per policy,
// then, indented under it, the Rejected message when the spec's revision
// was refused and a line per replica whose view differs from the policy's
// (not ready, or serving another revision).
func printPolicies(w io.Writer, sps []*api.SchedulingPolicy, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMODE\tSERVING\tSPEC\tLAST GOOD\tREADY\tREASON\tAGE")
	for _, sp := range sps {
		st := &sp.Status
		serving, lastGood := "-", "-"
		if st.Serving != nil {
			serving = api.ShortDigest(st.Serving.Module.SHA256)
		}
		if st.LastGood != nil {
			lastGood = api.ShortDigest(st.LastGood.Module.SHA256)
		}
		ready, reason := "Unknown", "-"
		if c := findCondition(st.Conditions, api.ConditionReady); c != nil {
			ready, reason = string(c.Status), orDash(c.Reason)
		}
		mode := string(sp.Spec.Mode)
		if mode == "" {
			mode = string(api.ModeEnforce)
		}
		age := "-"
		if !sp.CreationTimestamp.IsZero() {
			age = duration.HumanDuration(now.Sub(sp.CreationTimestamp.Time))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sp.Name, mode, serving,
			api.ShortDigest(sp.Spec.Module.SHA256), lastGood, ready, reason, age)
		if c := findCondition(st.Conditions, api.ConditionRejected); c != nil && c.Status == metav1.ConditionTrue {
			fmt.Fprintf(tw, "  rejected: %s: %s\n", c.Reason, oneLineMsg(c.Message))
		}
		for _, r := range st.Replicas {
			if r.Ready && (st.Serving == nil || r.Key == st.Serving.Key) {
				continue
			}
			name := r.Name
			if r.Profile != "" {
				name += " (profile " + r.Profile + ")"
			}
			state := "ready"
			if !r.Ready {
				state = "not ready"
			}
			line := fmt.Sprintf("  replica %s: serving %s, %s", name, api.ShortDigest(r.SHA256), state)
			if r.Message != "" {
				line += ": " + oneLineMsg(r.Message)
			}
			fmt.Fprintln(tw, line)
		}
	}
	return tw.Flush()
}

// policyReport is one policy in status -o json.
type policyReport struct {
	Name      string                     `json:"name"`
	Namespace string                     `json:"namespace"`
	Spec      api.Module                 `json:"specModule"`
	Status    api.SchedulingPolicyStatus `json:"status"`
}

func printPoliciesJSON(w io.Writer, sps []*api.SchedulingPolicy) error {
	out := make([]policyReport, len(sps))
	for i, sp := range sps {
		out[i] = policyReport{Name: sp.Name, Namespace: sp.Namespace, Spec: sp.Spec.Module, Status: sp.Status}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLineMsg keeps a message on its line of the table.
func oneLineMsg(s string) string { return strings.Join(strings.Fields(s), " ") }
