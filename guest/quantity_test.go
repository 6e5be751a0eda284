package guest

import (
	"strings"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// quantities is what k8s.io/apimachinery v0.37.2's resource.ParseQuantity
// makes of each string, MilliValue and Value (printed by a throwaway
// program: this module may not import Kubernetes), except that an amount
// beyond int64, which Kubernetes wraps or clamps, is an error here, and
// so is a number without digits, which Kubernetes reads as 0.
var quantities = []struct {
	s            string
	milli, value int64
	milliOK, ok  bool
}{
	{"0", 0, 0, true, true},
	{"1", 1000, 1, true, true},
	{"-1", -1000, -1, true, true},
	{"500m", 500, 1, true, true},
	{"0.5", 500, 1, true, true},
	{"1.5", 1500, 2, true, true},
	{"2.0001", 2001, 3, true, true},
	{"100m", 100, 1, true, true},
	{"1m", 1, 1, true, true},
	{"0.1m", 1, 1, true, true},
	{"1n", 1, 1, true, true},
	{"999n", 1, 1, true, true},
	{"1001n", 1, 1, true, true},
	{"1u", 1, 1, true, true},
	{"1500u", 2, 1, true, true},
	{"1k", 1000000, 1000, true, true},
	{"1M", 1000000000, 1000000, true, true},
	{"1G", 1000000000000, 1000000000, true, true},
	{"1T", 1000000000000000, 1000000000000, true, true},
	{"1P", 1000000000000000000, 1000000000000000, true, true},
	{"1E", 0, 1000000000000000000, false, true},
	{"8E", 0, 8000000000000000000, false, true},
	{"9E", 0, 9000000000000000000, false, true},
	{"1Ki", 1024000, 1024, true, true},
	{"1Mi", 1048576000, 1048576, true, true},
	{"1.5Gi", 1610612736000, 1610612736, true, true},
	{"0.3Ki", 307200, 308, true, true},
	{"0.001Ki", 1024, 2, true, true},
	{"1Ti", 1099511627776000, 1099511627776, true, true},
	{"1Pi", 1125899906842624000, 1125899906842624, true, true},
	{"1Ei", 0, 1152921504606846976, false, true},
	{"7Ei", 0, 8070450532247928832, false, true},
	{"8Ei", 0, 0, false, false},
	{"1e3", 1000000, 1000, true, true},
	{"1E3", 1000000, 1000, true, true},
	{"1e-3", 1, 1, true, true},
	{"1.5e2", 150000, 150, true, true},
	{"2e+2", 200000, 200, true, true},
	{"12e-1", 1200, 2, true, true},
	{"1e18", 0, 1000000000000000000, false, true},
	{"9.223372036854775807e18", 0, 9223372036854775807, false, true},
	{"9223372036854775807", 0, 9223372036854775807, false, true},
	{"9223372036854775808", 0, 0, false, false},
	{"-500m", -500, -1, true, true},
	{"-1.5", -1500, -2, true, true},
	{"-0.1m", -1, -1, true, true},
	{"+2", 2000, 2, true, true},
	{"1.", 1000, 1, true, true},
	{".5", 500, 1, true, true},
	{"000123", 123000, 123, true, true},
	{"0.000", 0, 0, true, true},
	{"123456789.123456789", 123456789124, 123456790, true, true},
	{"1e-30", 1, 1, true, true},
	{"0e100", 0, 0, true, true},
	{"129e6", 129000000000, 129000000, true, true},
	{"129M", 129000000000, 129000000, true, true},
	{"123Mi", 128974848000, 128974848, true, true},
	{"5Gi", 5368709120000, 5368709120, true, true},
	{"64Gi", 68719476736000, 68719476736, true, true},
	{"1.25Ti", 1374389534720000, 1374389534720, true, true},
	{"0.5Mi", 524288000, 524288, true, true},
	{"3.3333333333", 3334, 4, true, true},
	{"1x", 0, 0, false, false},
	{"1K", 0, 0, false, false},
	{"1 ", 0, 0, false, false},
	{" 1", 0, 0, false, false},
	{"1.2.3", 0, 0, false, false},
	{"e3", 0, 0, false, false}, // Kubernetes reads 0
	{"1e", 0, 0, false, false},
	{"1e+", 0, 0, false, false},
	{"1ee3", 0, 0, false, false},
	{"", 0, 0, false, false},
	{"-", 0, 0, false, false}, // Kubernetes reads 0
	{"+", 0, 0, false, false}, // Kubernetes reads 0
	{".", 0, 0, false, false}, // Kubernetes reads 0
	{"1Gi3", 0, 0, false, false},
}

func TestParseQuantity(t *testing.T) {
	for _, q := range quantities {
		got, err := ParseQuantity(q.s, ResourceCPU)
		if (err == nil) != q.milliOK || got != q.milli {
			t.Errorf("ParseQuantity(%q, cpu) = %d, %v; want %d (ok %v)", q.s, got, err, q.milli, q.milliOK)
		}
		got, err = ParseQuantity(q.s, ResourceMemory)
		if (err == nil) != q.ok || got != q.value {
			t.Errorf("ParseQuantity(%q, memory) = %d, %v; want %d (ok %v)", q.s, got, err, q.value, q.ok)
		}
	}
	if _, err := ParseQuantity("1x", "nvidia.com/gpu"); err == nil || err.Error() != `quantity "1x": unknown suffix "x"` {
		t.Errorf("error %v", err)
	}
	long := "0." + strings.Repeat("0", 399) + "1" // 10^-400, times 10^400
	if got, err := ParseQuantity(long+"e400", "memory"); got != 1 || err != nil {
		t.Errorf("a tiny positive amount with a large exponent: %d, %v", got, err)
	}
	if got, err := ParseQuantity("1e-1000000", "memory"); got != 1 || err != nil {
		t.Errorf("1e-1000000: %d, %v", got, err)
	}
	if _, err := ParseQuantity("1e1000000", "memory"); err == nil {
		t.Error("1e1000000 parsed")
	}
}

func TestValueQuantityAndResources(t *testing.T) {
	v := ParseValue([]byte(`{"cpu":"1500m","memory":"1Gi","ephemeral-storage":2e9,"pods":10,
		"nvidia.com/gpu":2,"amd.com/gpu":"0","hugepages-2Mi":"4Mi","bad":"1x","other":true,"amd.com/gpu":1}`))
	if q, ok := v.Get("cpu").Quantity(ResourceCPU); q != 1500 || !ok {
		t.Errorf("cpu %d, %v", q, ok)
	}
	if q, ok := v.Get("nvidia.com/gpu").Quantity("nvidia.com/gpu"); q != 2 || !ok {
		t.Errorf("number quantity %d, %v", q, ok)
	}
	for _, bad := range []Value{v.Get("bad"), v.Get("other"), v.Get("absent"), v} {
		if _, ok := bad.Quantity("x"); ok {
			t.Errorf("%s read as a quantity", bad.Raw())
		}
	}
	r := v.Resources()
	want := &abiv1.Resources{MilliCpu: 1500, Memory: 1 << 30, EphemeralStorage: 2e9, Pods: 10,
		Scalars: []*abiv1.Scalar{{Name: "amd.com/gpu", Value: 1}, {Name: "hugepages-2Mi", Value: 4 << 20}, {Name: "nvidia.com/gpu", Value: 2}}}
	if got, _ := r.MarshalVT(); string(got) != string(marshal(t, want)) {
		t.Errorf("Resources() = %v, want %v", r, want)
	}
	if ParseValue([]byte(`{"x":0}`)).Resources().Scalars[0].Value != 0 {
		t.Error("a scalar listed as 0 is left out")
	}
	if v.Get("cpu").Resources() != nil || (Value{}).Resources() != nil {
		t.Error("Resources of a non-object")
	}
}
