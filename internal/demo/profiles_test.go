package demo

import (
	"slices"
	"testing"
)

// The demo's profile is described with the label it selects and the push
// flags that add a policy to it.
func TestDescribeProfiles(t *testing.T) {
	cfg, err := SchedulerConfig("/tmp/kubeconfig")
	if err != nil {
		t.Fatal(err)
	}
	got, err := DescribeProfiles(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"profile default-scheduler runs the SchedulingPolicies of wasmsched-system labelled wasmsched.io/profile=wasmsched" +
		" (wasmsched push P.wasm --name N --namespace wasmsched-system --label wasmsched.io/profile=wasmsched adds one)"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	got, err = DescribeProfiles([]byte(`profiles:
- schedulerName: wasm
  pluginConfig:
  - name: WasmPolicy
    args: {namespace: ns, schedulingPolicies: {names: [a, b]}}
- schedulerName: static
  pluginConfig:
  - name: WasmPolicy
    args: {policies: [{name: gpu}, {name: zone}]}
- schedulerName: plain
`))
	want = []string{"profile wasm runs the SchedulingPolicies of ns named a, b", "profile static runs its static policies gpu, zone"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %q %v\nwant %q", got, err, want)
	}
}
