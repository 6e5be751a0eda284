package guest

import (
	"slices"
	"testing"
)

// TestReasonFormat pins how the status helpers build a reason: fmt's
// formatting with args, the format untouched without (where a "%%" is
// therefore not reduced to "%").
func TestReasonFormat(t *testing.T) {
	for _, tt := range []struct {
		name string
		got  Status
		want Status
	}{
		{"Reject with args", Reject("p: need %d, free %d", 2, 1), Status{Unschedulable, []string{"p: need 2, free 1"}}},
		{"Reject without args", Reject("p: no room"), Status{Unschedulable, []string{"p: no room"}}},
		{"a reason built elsewhere", Reject("%s", "p: 100% full"), Status{Unschedulable, []string{"p: 100% full"}}},
		{"without args, as it is", RejectUnresolvable("p: 100%% full"), Status{UnschedulableAndUnresolvable, []string{"p: 100%% full"}}},
		{"Errorf", Errorf("p: score %q", "x"), Status{Error, []string{`p: score "x"`}}},
	} {
		if tt.got.Code != tt.want.Code || !slices.Equal(tt.got.Reasons, tt.want.Reasons) {
			t.Errorf("%s: %v %q, want %v %q", tt.name, tt.got.Code, tt.got.Reasons, tt.want.Code, tt.want.Reasons)
		}
	}
}
