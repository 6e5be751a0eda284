package main

import (
	"math"
	"slices"
	"strconv"
	"strings"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
)

// unlimited is the max of a resource no quota names in max.
const unlimited = math.MaxInt64

// bound is one resource a quota governs: min guaranteed (0 when only max
// names it), max the ceiling (unlimited when only min names it). Amounts
// are in guest.Quantity units: milli-CPU, bytes, counts.
type bound struct {
	name     string
	min, max int64
}

// quota is a tenant's quota: the resources it governs, sorted by name.
// Resources it does not name are neither limited nor guaranteed.
type quota struct{ bounds []bound }

// index returns the position of resource name in q.bounds, or -1.
func (q *quota) index(name string) int {
	for i := range q.bounds {
		if q.bounds[i].name == name {
			return i
		}
	}
	return -1
}

// at returns the bound of resource name, adding one (min 0, unlimited)
// when q does not govern it yet.
func (q *quota) at(name string) *bound {
	if i := q.index(name); i >= 0 {
		return &q.bounds[i]
	}
	i, _ := slices.BinarySearchFunc(q.bounds, name, func(b bound, n string) int { return strings.Compare(b.name, n) })
	q.bounds = slices.Insert(q.bounds, i, bound{name: name, max: unlimited})
	return &q.bounds[i]
}

// addMin adds v to the min of resource name.
func (q *quota) addMin(name string, v int64) { b := q.at(name); b.min = sum(b.min, v) }

// addMax adds v to the max of resource name; the first max named replaces
// unlimited.
func (q *quota) addMax(name string, v int64) {
	b := q.at(name)
	if b.max == unlimited {
		b.max = v
		return
	}
	b.max = sum(b.max, v)
}

// add adds o's amounts to q's, as the quotas of two namespaces of one
// tenant add up.
func (q *quota) add(o *quota) {
	for _, b := range o.bounds {
		q.addMin(b.name, b.min)
		if b.max != unlimited {
			q.addMax(b.name, b.max)
		}
	}
}

// sum adds without overflowing.
func sum(a, b int64) int64 {
	if a > unlimited-b {
		return unlimited
	}
	return a + b
}

// addAmounts adds the min and max amounts of settings; errors name the
// field after "quotas.<tenant>.".
func (q *quota) addAmounts(min, max map[string]Amount) error {
	for _, part := range []struct {
		field   string
		amounts map[string]Amount
		add     func(string, int64)
	}{{"min", min, q.addMin}, {"max", max, q.addMax}} {
		names := make([]string, 0, len(part.amounts))
		for n := range part.amounts {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			v, err := guest.ParseQuantity(string(part.amounts[n]), n)
			if err != nil || v < 0 {
				return &fieldError{part.field + "." + n + `" is not a non-negative quantity: ` + strconv.Quote(string(part.amounts[n]))}
			}
			part.add(n, v)
		}
	}
	return nil
}

// fieldError is a settings error whose text follows the field's path.
type fieldError struct{ msg string }

func (e *fieldError) Error() string { return e.msg }

// addList adds the amounts of a ResourceList inside an object
// (spec.min, spec.max of an ElasticQuota) with add; it returns the first
// entry that is not a quantity.
func addList(v guest.Value, add func(string, int64)) (bad string) {
	v.Each(func(name string, val guest.Value) bool {
		amount, ok := val.Quantity(name)
		if !ok || amount < 0 {
			bad = name
			return false
		}
		add(name, amount)
		return true
	})
	return bad
}

// formatAmount prints an amount of resource name the way Kubernetes
// quantities read: cores or millicores for cpu, a binary suffix for whole
// Ki..Ti of byte resources, a plain number otherwise.
func formatAmount(name string, v int64) string {
	if v == unlimited {
		return "unlimited"
	}
	switch {
	case name == guest.ResourceCPU:
		if v%1000 == 0 {
			return strconv.FormatInt(v/1000, 10)
		}
		return strconv.FormatInt(v, 10) + "m"
	case name == guest.ResourceMemory || name == guest.ResourceEphemeralStorage || strings.HasPrefix(name, "hugepages-"):
		for _, u := range []struct {
			suffix string
			size   int64
		}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
			if v != 0 && v%u.size == 0 {
				return strconv.FormatInt(v/u.size, 10) + u.suffix
			}
		}
	}
	return strconv.FormatInt(v, 10)
}

// tenant is one tenant with a quota, as a cycle sees it.
type tenant struct {
	name   string
	quota  *quota
	weight int64
	// used is what the tenant's pods request, by quota.bounds position.
	used []int64
}

// addUsage adds (sign 1) or removes (-1) requests to the tenant's use, never
// below 0.
func (t *tenant) addUsage(r *abiv1.Resources, sign int64) {
	if r == nil {
		return
	}
	for i, b := range t.quota.bounds {
		t.used[i] = max(0, t.used[i]+sign*guest.Quantity(r, b.name))
	}
}

// aboveMin reports whether the tenant uses more than its min of some
// resource: it borrows.
func (t *tenant) aboveMin() bool {
	for i, b := range t.quota.bounds {
		if t.used[i] > b.min {
			return true
		}
	}
	return false
}
