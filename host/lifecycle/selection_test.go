package lifecycle

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A profile's published selection says which SchedulingPolicies it runs,
// and reads back from its JSON as a Status with the selection beside it.
func TestProfileReportSelects(t *testing.T) {
	byLabel := &ProfileReport{Selection: &PolicySelection{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"wasmsched.io/profile": "wasmsched"}}}}
	byName := &ProfileReport{Selection: &PolicySelection{Names: []string{"gpu", "zone"}}}
	static := &ProfileReport{}
	for _, tc := range []struct {
		r      *ProfileReport
		name   string
		labels map[string]string
		want   bool
	}{
		{byLabel, "x", map[string]string{"wasmsched.io/profile": "wasmsched"}, true},
		{byLabel, "x", map[string]string{"wasmsched.io/profile": "default-scheduler"}, false},
		{byLabel, "x", nil, false},
		{byName, "zone", nil, true},
		{byName, "teamzone", map[string]string{"wasmsched.io/profile": "wasmsched"}, false},
		{static, "gpu", nil, false},
	} {
		if got := tc.r.Selects(tc.name, tc.labels); got != tc.want {
			t.Errorf("%+v selects %s %v: %v, want %v", tc.r.Selection, tc.name, tc.labels, got, tc.want)
		}
	}

	byLabel.Status = Status{Replica: "r", Profile: "p", Updated: time.Unix(100, 0).UTC(), Policies: []SlotStatus{}}
	b, err := json.Marshal(byLabel)
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	var back ProfileReport
	if json.Unmarshal(b, &st) != nil || json.Unmarshal(b, &back) != nil || st.Replica != "r" || !st.Updated.Equal(byLabel.Updated) ||
		back.Selection == nil || !back.Selects("x", map[string]string{"wasmsched.io/profile": "wasmsched"}) {
		t.Fatalf("round trip of %s: %+v %+v", b, st, back)
	}
}
