package lifecycle

import (
	"strings"
	"testing"
)

// The trust policy's arguments: each mistake is refused naming the field.
func TestValidateTrust(t *testing.T) {
	key := func(name, cm, secret string) TrustKey { return TrustKey{Name: name, ConfigMap: cm, Secret: secret} }
	for _, tc := range []struct {
		name string
		set  func(a *Args)
		want string
	}{
		{"no keys", func(a *Args) { a.Trust = &TrustArgs{} }, "trust.keys: Required value: a trust policy lists at least one key"},
		{"bad mode", func(a *Args) { a.Trust = &TrustArgs{Mode: "Maybe", Keys: []TrustKey{key("a", "k", "")}} }, `trust.mode: Unsupported value: "Maybe"`},
		{"both sources", func(a *Args) { a.Trust = &TrustArgs{Keys: []TrustKey{key("a", "k", "s")}} }, `trust.keys[0]: Invalid value: "a": name exactly one of configMap and secret`},
		{"no source", func(a *Args) { a.Trust = &TrustArgs{Keys: []TrustKey{key("a", "", "")}} }, "name exactly one of configMap and secret"},
		{"duplicate", func(a *Args) { a.Trust = &TrustArgs{Keys: []TrustKey{key("a", "k", ""), key("a", "", "s")}} }, `trust.keys[1].name: Duplicate value: "a"`},
		{"widening", func(a *Args) {
			a.Trust = &TrustArgs{Keys: []TrustKey{key("a", "k", "")}}
			a.Policies[0].TrustedKeys = []string{"b"}
		}, `policies[0].trustedKeys[0]: Invalid value: "b": not a key of trust.keys: a policy may narrow the trust policy, never widen it`},
		{"narrowing nothing", func(a *Args) { a.Policies[0].TrustedKeys = []string{"b"} }, "trustedKeys needs a trust policy (the argument trust) to narrow"},
		{"pull secret without oci", func(a *Args) { a.Policies[0].Source.PullSecret = "regcred" }, `policies[0].source.pullSecret: Invalid value: "regcred": only meaningful with oci`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Args{Policies: []PolicyArgs{{Name: "p", Source: Source{File: "/p.wasm"}}}}
			tc.set(a)
			SetDefaults(a)
			if err := Validate(a).ToAggregate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("want %q, got %v", tc.want, err)
			}
		})
	}
	ok := &Args{Trust: &TrustArgs{Keys: []TrustKey{key("a", "k", ""), {Name: "b", Secret: "s", Key: "b.pub"}}},
		Policies: []PolicyArgs{{Name: "p", Source: Source{OCI: "oci://r.example/p@sha256:" + strings.Repeat("a", 64), SHA256: strings.Repeat("b", 64), PullSecret: "regcred"}, TrustedKeys: []string{"b"}}}}
	SetDefaults(ok)
	if errs := Validate(ok); len(errs) > 0 {
		t.Errorf("valid arguments refused: %v", errs)
	}
	if ok.Trust.Mode != TrustRequired || ok.Trust.Keys[0].Key != "cosign.pub" {
		t.Errorf("defaults: mode %q, key %q", ok.Trust.Mode, ok.Trust.Keys[0].Key)
	}
}
