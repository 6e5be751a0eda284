package skew

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	apiversion "k8s.io/apimachinery/pkg/version"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		build string
		info  apiversion.Info
		want  string // "" allowed; otherwise a part of the error
	}{
		{"1.37", apiversion.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2"}, ""},
		{"1.36", apiversion.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2"}, ""},
		{"1.36", apiversion.Info{Major: "1", Minor: "37+", GitVersion: "v1.37.2-gke.100"}, ""},
		{"1.37", apiversion.Info{Major: "1", Minor: "36", GitVersion: "v1.36.4"},
			"version skew: this kube-scheduler is built from Kubernetes 1.37 and the kube-apiserver is 1.36 (v1.36.4): " +
				"a scheduler may be as new as the apiserver or one minor older, never newer; run the wasmsched build for 1.36"},
		{"1.35", apiversion.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2"},
			"version skew: this kube-scheduler is built from Kubernetes 1.35 and the kube-apiserver is 1.37 (v1.37.2): " +
				"a scheduler may be at most one minor older than the apiserver; run a wasmsched build for 1.36 or 1.37"},
		// An apiserver emulating 1.36 serves 1.36's APIs.
		{"1.37", apiversion.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2", EmulationMajor: "1", EmulationMinor: "36"},
			"the kube-apiserver is 1.36 (v1.37.2 emulating 1.36): a scheduler may be as new as the apiserver"},
		{"1.36", apiversion.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2", EmulationMajor: "1", EmulationMinor: "36"}, ""},
		// Every apiserver reports its emulation version, usually its own.
		{"1.37", apiversion.Info{Major: "1", Minor: "36", GitVersion: "v1.36.4", EmulationMajor: "1", EmulationMinor: "36"},
			"the kube-apiserver is 1.36 (v1.36.4): a scheduler"},
		{"1.37", apiversion.Info{GitVersion: "v0.0.0-master+$Format:%H$"}, `no Kubernetes 1.x minor`},
	} {
		err := check(tc.build, &tc.info)
		var skewErr *Error
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("build %s, apiserver %+v: %v, want allowed", tc.build, tc.info, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("build %s, apiserver %+v: %v, want an error containing %q", tc.build, tc.info, err, tc.want)
		case tc.want != "" && strings.Contains(tc.want, "no Kubernetes") == errors.As(err, &skewErr):
			t.Errorf("build %s, apiserver %+v: %v: wrong kind of error (%T)", tc.build, tc.info, err, err)
		}
	}
}

// The constant names the linked Kubernetes: a per-minor file built against
// another minor's modules would show here.
func TestMinorIsLinked(t *testing.T) {
	if _, ok := parse(Minor); !ok {
		t.Fatalf("Minor %q is not 1.N", Minor)
	}
}

// reporting answers a fixed version, as an apiserver of another minor
// would (one cannot run in this process).
type reporting apiversion.Info

func (r reporting) ServerVersion() (*apiversion.Info, error) {
	info := apiversion.Info(r)
	return &info, nil
}

// Verify refuses a pairing outside the policy unless WASMSCHED_SKEW_CHECK
// is warn, and lets through an apiserver that cannot say.
func TestVerify(t *testing.T) {
	m, _ := parse(Minor)
	twoNewer := reporting{Major: "1", Minor: strconv.Itoa(m + 2), GitVersion: "v1." + strconv.Itoa(m+2) + ".0"}
	var skewErr *Error
	if err := Verify(context.Background(), twoNewer); !errors.As(err, &skewErr) {
		t.Fatalf("Verify against 1.%d = %v, want a skew error", m+2, err)
	}
	t.Setenv(EnvCheck, "warn")
	if err := Verify(context.Background(), twoNewer); err != nil {
		t.Fatalf("Verify with %s=warn = %v, want nil", EnvCheck, err)
	}
	t.Setenv(EnvCheck, "")
	if err := Verify(context.Background(), reporting{GitVersion: "v0.0.0-master"}); err != nil {
		t.Fatalf("Verify against a development build = %v, want nil (logged)", err)
	}
	if err := Verify(context.Background(), reporting{Major: "1", Minor: strconv.Itoa(m) + "+"}); err != nil {
		t.Fatalf("Verify against 1.%d+ = %v, want nil", m, err)
	}
}
