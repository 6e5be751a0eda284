package guesttest

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/wasmsched/wasmsched/guest"
)

// suffixes are the multipliers of Kubernetes quantity suffixes.
var suffixes = map[string]*big.Rat{
	"n": big.NewRat(1, 1e9), "u": big.NewRat(1, 1e6), "m": big.NewRat(1, 1e3), "": big.NewRat(1, 1),
	"k": big.NewRat(1e3, 1), "M": big.NewRat(1e6, 1), "G": big.NewRat(1e9, 1), "T": big.NewRat(1e12, 1),
	"P": big.NewRat(1e15, 1), "E": big.NewRat(1e18, 1),
	"Ki": big.NewRat(1<<10, 1), "Mi": big.NewRat(1<<20, 1), "Gi": big.NewRat(1<<30, 1), "Ti": big.NewRat(1<<40, 1),
	"Pi": big.NewRat(1<<50, 1), "Ei": big.NewRat(1<<60, 1),
}

// amount converts a quantity of the named resource to the units of
// guest.Quantity, rounding up as Kubernetes does: milli-CPU for "cpu", the
// integer value for everything else ("1Gi" of memory is 1073741824).
func amount(name string, q quantity) (int64, error) {
	s := strings.TrimSpace(string(q))
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	num, suffix := s[:i], s[i:]
	v, ok := new(big.Rat).SetString(num)
	if !ok || num == "" || strings.Count(num, ".") > 1 {
		return 0, fmt.Errorf("resource %s: quantity %q is not a number with a unit", name, s)
	}
	if mult, ok := suffixes[suffix]; ok {
		v.Mul(v, mult)
	} else if len(suffix) > 1 && (suffix[0] == 'e' || suffix[0] == 'E') {
		var exp int64
		if _, err := fmt.Sscanf(suffix[1:], "%d", &exp); err != nil || exp < -18 || exp > 18 || fmt.Sprint(exp) != strings.TrimPrefix(suffix[1:], "+") {
			return 0, fmt.Errorf("resource %s: quantity %q has a bad exponent", name, s)
		}
		ten := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(abs(exp)), nil))
		if exp < 0 {
			ten.Inv(ten)
		}
		v.Mul(v, ten)
	} else {
		return 0, fmt.Errorf("resource %s: quantity %q has an unknown unit %q", name, s, suffix)
	}
	if name == guest.ResourceCPU {
		v.Mul(v, big.NewRat(1000, 1))
	}
	// Round up, as Quantity.Value and MilliValue do.
	n, rem := new(big.Int).QuoRem(v.Num(), v.Denom(), new(big.Int))
	if rem.Sign() > 0 {
		n.Add(n, big.NewInt(1))
	}
	if !n.IsInt64() {
		return 0, fmt.Errorf("resource %s: quantity %q is out of range", name, s)
	}
	return n.Int64(), nil
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
