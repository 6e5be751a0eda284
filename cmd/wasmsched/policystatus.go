package main

import (
	"fmt"
	"io"
	"strings"
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
	// The detail lines sit between the rows, so tabwriter (which aligns
	// runs of lines) cannot align the rows across them: columns are sized
	// here, over every row.
	rows := [][]string{{"NAME", "MODE", "SERVING", "SPEC", "LAST GOOD", "READY", "REASON", "AGE"}}
	details := [][]string{nil}
	for _, sp := range sps {
		rows = append(rows, policyRow(sp, now))
		details = append(details, policyDetails(sp))
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, cell := range r {
			widths[i] = max(widths[i], len(cell))
		}
	}
	var b strings.Builder
	for k, r := range rows {
		for i, cell := range r {
			if i == len(r)-1 {
				b.WriteString(cell)
				break
			}
			fmt.Fprintf(&b, "%-*s", widths[i]+2, cell)
		}
		b.WriteString("\n")
		for _, d := range details[k] {
			b.WriteString("  " + d + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// policyRow is a policy's line of the table.
func policyRow(sp *api.SchedulingPolicy, now time.Time) []string {
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
	return []string{sp.Name, mode, serving, api.ShortDigest(sp.Spec.Module.SHA256), lastGood, ready, reason, age}
}

// policyDetails are the lines under a policy's row: the Rejected message,
// and the replicas whose view differs from the policy's.
func policyDetails(sp *api.SchedulingPolicy) []string {
	st := &sp.Status
	var out []string
	if c := findCondition(st.Conditions, api.ConditionRejected); c != nil && c.Status == metav1.ConditionTrue {
		out = append(out, fmt.Sprintf("rejected: %s: %s", c.Reason, oneLineMsg(c.Message)))
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
		line := fmt.Sprintf("replica %s: serving %s, %s", name, api.ShortDigest(r.SHA256), state)
		if r.Message != "" {
			line += ": " + oneLineMsg(r.Message)
		}
		out = append(out, line)
	}
	return out
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
	return writeJSON(w, out)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLineMsg keeps a message on its line of the table.
func oneLineMsg(s string) string { return strings.Join(strings.Fields(s), " ") }
