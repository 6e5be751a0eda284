package hosttest

import (
	"context"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/host/eval"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// BadSettings are settings a policy must refuse, and a part of the error
// that must name the problem.
type BadSettings struct{ Settings, Want string }

// RejectsSettings loads the policy built from pkg (named name) with each of
// cases and fails unless every load fails with an error containing its
// Want, and the builds of every toolchain give the same errors.
func RejectsSettings(t *testing.T, pkg, name string, cases []BadSettings) {
	t.Helper()
	testwasm.Agree(t, pkg, func(t *testing.T, wasm []byte) []string {
		var errs []string
		for _, tc := range cases {
			t.Run(tc.Settings, func(t *testing.T) {
				ev, err := eval.Load(context.Background(), []eval.PolicySpec{{Name: name, Wasm: wasm, Settings: []byte(tc.Settings)}})
				if err == nil {
					ev.Close(context.Background())
					t.Fatalf("settings %s loaded, want an error", tc.Settings)
				}
				if !strings.Contains(err.Error(), tc.Want) {
					t.Errorf("settings %s: %v, want it to contain %q", tc.Settings, err, tc.Want)
				}
				errs = append(errs, testwasm.Unversioned(err))
			})
		}
		return errs
	})
}
