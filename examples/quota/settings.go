package main

import (
	"errors"
	"slices"
	"strconv"

	"github.com/wasmsched/wasmsched/guest"
)

// Name is the policy's name; every rejection reason starts with it.
const Name = "quota"

// KindElasticQuota is scheduler-plugins' ElasticQuota, read when the
// settings leave elasticQuotas on.
var KindElasticQuota = guest.Kind{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "elasticquotas"}

// Settings are the operator's settings, as JSON:
//
//	{"tenantLabel": "example.com/tenant", "elasticQuotas": true,
//	 "quotas": {"team-a": {"min": {"cpu": "4"}, "max": {"cpu": 8}, "weight": 2}}}
//
// DefaultSettings gives the defaults; fields left out keep them.
type Settings struct {
	// TenantLabel, when set, makes the tenant of a pod the value of this
	// label on the pod's namespace (read from Namespace objects); when
	// empty, the tenant is the namespace.
	TenantLabel string `json:"tenantLabel"`
	// ElasticQuotas (default true) reads ElasticQuota objects; false
	// leaves them out of the kinds the policy asks for.
	ElasticQuotas bool `json:"elasticQuotas"`
	// Quotas are tenants' quotas and weights, by tenant.
	Quotas map[string]TenantSettings `json:"quotas"`
}

// TenantSettings is one tenant's quota: amounts by resource name, as
// Kubernetes quantities ("500m", "8Gi") or JSON numbers.
type TenantSettings struct {
	Min map[string]Amount `json:"min"`
	Max map[string]Amount `json:"max"`
	// Weight scales the tenant's scores (1 to MaxWeight; 0 or absent is 1).
	Weight int64 `json:"weight"`
}

// Amount is a quantity in settings: a JSON string or number.
type Amount string

// UnmarshalJSON accepts "8Gi" as well as 8.
func (a *Amount) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	*a = Amount(s)
	return nil
}

// MaxWeight bounds a tenant's weight, so that weight times score stays far
// from overflowing and one tenant cannot dwarf the rest by a typo.
const MaxWeight = 1000

// DefaultSettings returns the settings used where the operator gives none.
func DefaultSettings() Settings {
	return Settings{ElasticQuotas: true, Quotas: map[string]TenantSettings{}}
}

// Policy is the validated configuration, and a cache of the ElasticQuota
// objects it parsed. An instance runs one call at a time, so the cache
// needs no lock.
type Policy struct {
	tenantLabel string
	readEQ      bool
	// configured are the quotas the settings give, by tenant; a tenant
	// with only a weight has none.
	configured map[string]*quota
	weights    map[string]int64
	maxWeight  int64
	// eqs are the ElasticQuota objects parsed, in the order Cycle.Objects
	// gives them, with the resource version each was parsed at.
	eqs []parsedEQ
	// roster is the tenants with a quota as last built (tenants).
	roster *roster
}

// New validates s and builds the policy. Errors name the offending field.
func New(s Settings) (*Policy, error) {
	p := &Policy{
		tenantLabel: s.TenantLabel,
		readEQ:      s.ElasticQuotas,
		configured:  map[string]*quota{},
		weights:     map[string]int64{},
		maxWeight:   1,
	}
	tenants := make([]string, 0, len(s.Quotas))
	for t := range s.Quotas {
		tenants = append(tenants, t)
	}
	slices.Sort(tenants) // the first error is the same every time
	for _, t := range tenants {
		ts := s.Quotas[t]
		field := `settings: "quotas.` + t
		if t == "" {
			return nil, errors.New(`settings: "quotas" has an empty tenant name`)
		}
		if ts.Weight < 0 || ts.Weight > MaxWeight {
			return nil, errors.New(field + `.weight" must be 1 to ` + strconv.Itoa(MaxWeight) + ", got " + strconv.FormatInt(ts.Weight, 10))
		}
		if ts.Weight > 0 {
			p.weights[t] = ts.Weight
			p.maxWeight = max(p.maxWeight, ts.Weight)
		}
		if len(ts.Min) == 0 && len(ts.Max) == 0 {
			continue
		}
		q := &quota{}
		if err := q.addAmounts(ts.Min, ts.Max); err != nil {
			return nil, errors.New(field + "." + err.Error())
		}
		for _, b := range q.bounds {
			if b.max != unlimited && b.min > b.max {
				return nil, errors.New(field + `": min ` + b.name + " " + formatAmount(b.name, b.min) + " exceeds max " + formatAmount(b.name, b.max))
			}
		}
		p.configured[t] = q
	}
	return p, nil
}

// Kinds returns the kinds of cluster object the policy reads with these
// settings: ElasticQuotas unless turned off, Namespaces with a tenant label.
func (p *Policy) Kinds() []guest.Kind {
	var k []guest.Kind
	if p.readEQ {
		k = append(k, KindElasticQuota)
	}
	if p.tenantLabel != "" {
		k = append(k, guest.KindNamespace)
	}
	return k
}

// weight returns a tenant's weight: its setting, or 1.
func (p *Policy) weight(tenant string) int64 {
	if w, ok := p.weights[tenant]; ok {
		return w
	}
	return 1
}
