package testwasm

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"testing"
)

// Toolchain is one way of building a policy module from a Go package.
type Toolchain struct {
	// Name is the subtest name Agree gives the toolchain's run.
	Name string
	// Bytes builds a package and returns the module, skipping or failing
	// the test when the toolchain cannot run.
	Bytes func(tb testing.TB, pkg string) []byte
}

// Toolchains are the builds every example is tested with: the standard Go
// toolchain (`make examples`) and TinyGo (`make examples-tinygo`).
var Toolchains = []Toolchain{
	{Name: "go", Bytes: Bytes},
	{Name: "tinygo", Bytes: TinyGoBytes},
}

// Agree runs run once per toolchain, as subtests named after it, with the
// module each builds from pkg, and then fails t unless every run that
// finished returned equal results (reflect.DeepEqual): the builds of one
// policy must give the same verdicts, reasons and scores. run makes its own
// assertions as well; Agree adds that the builds do not differ. A run that
// is skipped (TinyGo absent) or fails is left out of the comparison.
func Agree[R any](t *testing.T, pkg string, run func(t *testing.T, wasm []byte) R) {
	t.Helper()
	var names []string
	var values []R
	for _, tc := range Toolchains {
		t.Run(tc.Name, func(t *testing.T) {
			v := run(t, tc.Bytes(t, pkg))
			if !t.Failed() {
				names, values = append(names, tc.Name), append(values, v)
			}
		})
	}
	if msg := disagreement(pkg, names, values); msg != "" {
		t.Error(msg)
	}
}

// disagreement describes the first result that differs from the first
// one, or returns "" when all are equal.
func disagreement[R any](pkg string, names []string, values []R) string {
	for i := 1; i < len(values); i++ {
		if !reflect.DeepEqual(values[i], values[0]) {
			return fmt.Sprintf("the %s and %s builds of %s disagree:\n%s: %s\n%s: %s", names[0], names[i], pkg,
				names[0], show(values[0]), names[i], show(values[i]))
		}
	}
	return ""
}

// show prints a result for a disagreement message: as JSON, which follows
// pointers, or with %#v when it has no JSON form.
func show(v any) string {
	if b, err := json.Marshal(v); err == nil {
		return string(b)
	}
	return fmt.Sprintf("%#v", v)
}

// policyVersion matches the version in the host's name for a policy
// (policy gpu@544b4372ad8c: ...), which is a digest of the module and so
// differs between builds.
var policyVersion = regexp.MustCompile(`@[0-9a-f]{12}\b`)

// Unversioned returns err's text with policy versions replaced by
// "@<version>", for comparing the errors of two builds of a policy.
func Unversioned(err error) string {
	if err == nil {
		return ""
	}
	return policyVersion.ReplaceAllString(err.Error(), "@<version>")
}
