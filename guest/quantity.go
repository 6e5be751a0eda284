package guest

import (
	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// ParseQuantity parses a Kubernetes resource quantity ("500m", "1.5Gi",
// "2", "1e3") into the units of Quantity for the named resource: milli-CPU
// for "cpu", the integer value for everything else ("1Gi" of memory is
// 1073741824). A fraction left over rounds up, as resource.Quantity's
// MilliValue and Value do ("0.1m" of cpu is 1, "1.5" gpus are 2); a
// negative amount rounds away from zero.
//
// The grammar is Kubernetes': an optionally signed decimal number, then
// one of the suffixes n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent
// e<n> / E<n>. It is parsed exactly, without floating point or math/big.
// Two differences: a number without any digit ("+", ".") is an error here
// where Kubernetes reads 0, and an amount beyond int64 in the resource's
// units is an error where Kubernetes clamps or wraps.
func ParseQuantity(s, resource string) (int64, error) {
	bad := func(why string) (int64, error) {
		return 0, errorString("quantity " + quote(s) + ": " + why)
	}
	if s == "" {
		return bad("empty")
	}
	p := 0
	neg := false
	if s[0] == '+' || s[0] == '-' {
		neg = s[0] == '-'
		p++
	}
	intStart := p
	for p < len(s) && s[p] >= '0' && s[p] <= '9' {
		p++
	}
	intPart := s[intStart:p]
	frac := ""
	if p < len(s) && s[p] == '.' {
		p++
		fracStart := p
		for p < len(s) && s[p] >= '0' && s[p] <= '9' {
			p++
		}
		frac = s[fracStart:p]
	}
	if intPart == "" && frac == "" {
		return bad("no number")
	}
	exp10, exp2 := 0, 0
	switch suffix := s[p:]; suffix {
	case "":
	case "n":
		exp10 = -9
	case "u":
		exp10 = -6
	case "m":
		exp10 = -3
	case "k":
		exp10 = 3
	case "M":
		exp10 = 6
	case "G":
		exp10 = 9
	case "T":
		exp10 = 12
	case "P":
		exp10 = 15
	case "E":
		exp10 = 18
	case "Ki":
		exp2 = 10
	case "Mi":
		exp2 = 20
	case "Gi":
		exp2 = 30
	case "Ti":
		exp2 = 40
	case "Pi":
		exp2 = 50
	case "Ei":
		exp2 = 60
	default:
		e, ok := parseExponent(suffix)
		if !ok {
			return bad("unknown suffix " + quote(suffix))
		}
		exp10 = e
	}
	if resource == ResourceCPU {
		exp10 += 3
	}
	// The amount is digits × 2^exp2 × 10^(exp10 - len(frac)).
	digits := []byte(intPart + frac)
	exp10 -= len(frac)
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
	}
	if len(digits) == 0 {
		return 0, nil
	}
	for digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		exp10++
	}
	for ; exp2 > 0; exp2 -= 10 {
		digits = mulSmall(digits, 1<<10)
	}
	// maxDigits is the length of the largest int64, 9223372036854775807.
	const maxDigits = 19
	whole, rest := digits, []byte(nil)
	switch {
	case exp10 >= 0:
		if len(digits)+exp10 > maxDigits {
			return bad("out of range")
		}
		for range exp10 {
			whole = append(whole, '0')
		}
	case -exp10 >= len(digits):
		whole, rest = nil, digits
	default:
		whole, rest = digits[:len(digits)+exp10], digits[len(digits)+exp10:]
	}
	if len(whole) > maxDigits {
		return bad("out of range")
	}
	var v uint64
	for _, d := range whole {
		v = v*10 + uint64(d-'0')
	}
	for _, d := range rest {
		if d != '0' {
			v++ // round the magnitude up
			break
		}
	}
	if v > 1<<63-1 {
		return bad("out of range")
	}
	if neg {
		return -int64(v), nil
	}
	return int64(v), nil
}

// parseExponent reads the suffix e<n> or E<n>, n an optionally signed
// decimal. An exponent beyond ±1000 is clamped: no int64 amount needs
// more, and the result is then out of range or rounds up to 1 alike.
func parseExponent(s string) (int, bool) {
	if len(s) < 2 || s[0] != 'e' && s[0] != 'E' {
		return 0, false
	}
	s = s[1:]
	neg := s[0] == '-'
	if s[0] == '+' || s[0] == '-' {
		s = s[1:]
	}
	if s == "" {
		return 0, false
	}
	e := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		e = min(e*10+int(s[i]-'0'), 1000)
	}
	if neg {
		return -e, true
	}
	return e, true
}

// mulSmall multiplies a decimal number, as digits, by m.
func mulSmall(digits []byte, m int) []byte {
	out := make([]byte, len(digits)+5)
	carry := 0
	i := len(out)
	for j := len(digits) - 1; j >= 0; j-- {
		x := int(digits[j]-'0')*m + carry
		i--
		out[i] = byte('0' + x%10)
		carry = x / 10
	}
	for carry > 0 {
		i--
		out[i] = byte('0' + carry%10)
		carry /= 10
	}
	return out[i:]
}

// quote puts s in double quotes, for error messages.
func quote(s string) string { return `"` + s + `"` }

// Quantity returns the value as a Kubernetes quantity of the named
// resource, in the units of guest.Quantity (see ParseQuantity): a string
// ("500m", "4Gi") or a number (2, 0.5), as a ResourceList holds them. It
// reports false for anything else and for a malformed quantity.
func (v Value) Quantity(resource string) (int64, bool) {
	var s string
	switch {
	case v.doc == nil:
		return 0, false
	case v.node().typ == jNumber:
		s = string(v.Raw())
	default:
		var ok bool
		if s, ok = v.String(); !ok {
			return 0, false
		}
	}
	q, err := ParseQuantity(s, resource)
	return q, err == nil
}

// Resources reads a ResourceList, an object of resource names and
// quantities ({"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": 1}), into
// Resources in the units of Quantity, scalars sorted by name. Scalars
// listed with 0 are kept (for a limit, 0 and absent differ; Get tells
// them apart for the named fields too). A member that is no quantity is
// left out. It returns nil when v is no object.
func (v Value) Resources() *abiv1.Resources {
	if !v.IsObject() {
		return nil
	}
	r := &abiv1.Resources{}
	v.Each(func(name string, q Value) bool {
		amount, ok := q.Quantity(name)
		if !ok {
			return true
		}
		switch name {
		case ResourceCPU:
			r.MilliCpu = amount
		case ResourceMemory:
			r.Memory = amount
		case ResourceEphemeralStorage:
			r.EphemeralStorage = amount
		case ResourcePods:
			r.Pods = amount
		default:
			for _, s := range r.Scalars {
				if s.Name == name {
					s.Value = amount
					return true
				}
			}
			r.Scalars = append(r.Scalars, &abiv1.Scalar{Name: name, Value: amount})
		}
		return true
	})
	sortBy(r.Scalars, func(s *abiv1.Scalar) string { return s.Name })
	return r
}
