package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
)

// printPolicies prints SchedulingPolicies as a table: a line per policy
// naming its revisions (module, settings and limits: api.Revision) by key,
// the one serving and since when, and the last good one; then, indented
// under it, what each of those revisions holds, the Rejected message when
// the spec's revision was refused, a line per replica whose view differs
// from the policy's (not ready, or serving another revision), and why no
// scheduler profile selects it when none does.
func printPolicies(w io.Writer, sps []*api.SchedulingPolicy, sels selections, now time.Time) error {
	// The detail lines sit between the rows, so tabwriter (which aligns
	// runs of lines) cannot align the rows across them: columns are sized
	// here, over every row.
	rows := [][]string{{"NAME", "MODE", "SPEC", "SERVING", "SINCE", "LAST GOOD", "READY", "REASON", "AGE"}}
	details := [][]string{nil}
	for _, sp := range sps {
		rows = append(rows, policyRow(sp, now))
		details = append(details, policyDetails(sp, sels))
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

// policyRow is a policy's line of the table: revisions by key.
func policyRow(sp *api.SchedulingPolicy, now time.Time) []string {
	st := &sp.Status
	serving, since, lastGood := "-", "-", "-"
	if st.Serving != nil {
		serving = st.Serving.Key
		if st.LoadedAt != nil {
			since = duration.HumanDuration(now.Sub(st.LoadedAt.Time))
		}
	}
	if st.LastGood != nil {
		lastGood = st.LastGood.Key
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
	return []string{sp.Name, mode, api.SpecRevision(sp).Key, serving, since, lastGood, ready, reason, age}
}

// policyDetails are the lines under a policy's row: what its revisions
// hold, the Rejected message, the replicas whose view differs from the
// policy's, and why no profile selects it.
func policyDetails(sp *api.SchedulingPolicy, sels selections) []string {
	st := &sp.Status
	var out []string
	spec := api.SpecRevision(sp)
	revs := []struct {
		role string
		rev  *api.Revision
	}{{"spec", &spec}, {"serving", st.Serving}, {"last good", st.LastGood}}
	var seen []string
	for i, r := range revs {
		if r.rev == nil || slices.Contains(seen, r.rev.Key) {
			continue
		}
		seen = append(seen, r.rev.Key)
		roles := []string{r.role}
		for _, o := range revs[i+1:] {
			if o.rev != nil && o.rev.Key == r.rev.Key {
				roles = append(roles, o.role)
			}
		}
		out = append(out, fmt.Sprintf("%s %s: %s", strings.Join(roles, ", "), r.rev.Key, describeRevision(r.rev)))
	}
	if m := &sp.Spec.Module; m.IsTag() {
		if res := st.Resolved; res.Matches(m) {
			out = append(out, fmt.Sprintf("tag %s resolved to %s (module %s) at %s by %s; it loads until the tag or its resolve token changes (wasmsched resolve %s resolves it again)",
				m.OCI, res.Digest, api.ShortDigest(res.SHA256), res.ResolvedAt.UTC().Format(time.RFC3339), orDash(res.Replica), sp.Name))
		} else {
			out = append(out, fmt.Sprintf("tag %s not resolved yet", m.OCI))
		}
	}
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
		serving := "(none)"
		if r.Key != "" {
			serving = r.Key
		}
		line := fmt.Sprintf("replica %s: serving %s, %s", name, serving, state)
		if r.Message != "" {
			line += ": " + oneLineMsg(r.Message)
		}
		out = append(out, line)
	}
	if why := sels.notSelected(sp.Name, sp.Labels); why != "" {
		out = append(out, why)
	}
	return out
}

// maxSettingsShown is how much of a revision's settings a status line
// shows (status -o json has them whole).
const maxSettingsShown = 80

// describeRevision is what a revision loads: module digest, settings,
// context and the limits set.
func describeRevision(r *api.Revision) string {
	parts := []string{"module " + api.ShortDigest(r.Module.SHA256)}
	switch {
	case r.Module.IsTag() && r.Module.SHA256 == "":
		parts[0] = "module of tag " + r.Module.OCI
	case r.Module.ResolvedFrom != "":
		parts[0] += " (from tag " + r.Module.ResolvedFrom + ")"
	}
	settings := "settings none"
	if len(r.Settings) > 0 {
		s := oneLineMsg(string(r.Settings))
		if len(s) > maxSettingsShown {
			s = s[:maxSettingsShown-3] + "..."
		}
		settings = "settings " + s
	}
	parts = append(parts, settings)
	if len(r.Context) > 0 {
		parts = append(parts, "context "+strings.Join(r.Context, ","))
	}
	if r.Timeout != nil {
		parts = append(parts, "timeout "+r.Timeout.Duration.String())
	}
	if r.MemoryLimit != nil {
		parts = append(parts, "memoryLimit "+r.MemoryLimit.String())
	}
	if r.MaxInstances > 0 {
		parts = append(parts, fmt.Sprintf("maxInstances %d", r.MaxInstances))
	}
	return strings.Join(parts, ", ")
}

// policyReport is one policy in status -o json.
type policyReport struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// SpecRevision is the key of the revision the spec names.
	SpecRevision string                     `json:"specRevision"`
	Spec         api.Module                 `json:"specModule"`
	Status       api.SchedulingPolicyStatus `json:"status"`
	// NotSelected says why no scheduler profile selects the policy.
	NotSelected string `json:"notSelected,omitempty"`
}

func printPoliciesJSON(w io.Writer, sps []*api.SchedulingPolicy, sels selections) error {
	out := make([]policyReport, len(sps))
	for i, sp := range sps {
		out[i] = policyReport{Name: sp.Name, Namespace: sp.Namespace, SpecRevision: api.SpecRevision(sp).Key, Spec: sp.Spec.Module,
			Status: sp.Status, NotSelected: sels.notSelected(sp.Name, sp.Labels)}
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
