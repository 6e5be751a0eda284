package trust

import (
	"crypto"
	"fmt"
	"strings"

	"github.com/wasmsched/wasmsched/host/source"
)

// Key is a trusted public key and the name the trust policy gives it.
type Key struct {
	Name   string
	Public crypto.PublicKey
}

// Policy is what the scheduler trusts: signatures by any of Keys (two keys
// at once during a rotation). Required refuses unsigned modules; when it
// is false an unsigned module loads, but a signature that is there must
// still verify. Its methods are safe for concurrent use; it is never
// changed once made.
type Policy struct {
	Keys     []Key
	Required bool
}

// Error is a module refused by the trust policy. Reason says why, naming
// the signatures looked at and the keys tried.
type Error struct {
	Reason string
}

func (e *Error) Error() string { return "untrusted: " + e.Reason }

// Verdict is what Check found: the key that verified (nil when an
// unsigned module was allowed).
type Verdict struct {
	Key *Key
	// Unsigned: the module had no signature and the policy allowed it.
	Unsigned bool
}

// Check decides whether v may load. demand narrows the policy for one
// module: when not empty, only the keys named there verify, and a
// signature is required whatever Required says. A name in demand the
// policy does not list is an error (a policy may narrow the cluster's
// trust, never widen it).
func (p *Policy) Check(v source.Version, demand []string) (Verdict, error) {
	keys := p.Keys
	required := p.Required
	if len(demand) > 0 {
		required = true
		keys = nil
		for _, n := range demand {
			k, ok := p.key(n)
			if !ok {
				return Verdict{}, &Error{Reason: fmt.Sprintf("the policy demands key %q, which the cluster's trust policy does not list (it lists %s)", n, p.names(p.Keys))}
			}
			keys = append(keys, k)
		}
	}
	if len(v.Signatures) == 0 {
		if !required {
			return Verdict{Unsigned: true}, nil
		}
		return Verdict{}, &Error{Reason: fmt.Sprintf("module sha256:%s is not signed (no signature beside it); a signature by %s is required", v.Digest, p.names(keys))}
	}
	var why []string
	for _, s := range v.Signatures {
		k, err := verifyOne(keys, v, s)
		if err == nil {
			return Verdict{Key: &k}, nil
		}
		why = append(why, fmt.Sprintf("%s: %v", s.From, err))
	}
	return Verdict{}, &Error{Reason: fmt.Sprintf("no signature of module sha256:%s verifies with %s: %s", v.Digest, p.names(keys), strings.Join(why, "; "))}
}

// verifyOne checks one signature against keys.
func verifyOne(keys []Key, v source.Version, s source.Signature) (Key, error) {
	message := v.Module
	if s.Payload != nil {
		d, err := payloadDigest(s.Payload)
		if err != nil {
			return Key{}, err
		}
		switch {
		case v.Manifest == "":
			return Key{}, fmt.Errorf("an image signature (for manifest %s) beside a module that is not an OCI artifact", d)
		case d != v.Manifest:
			return Key{}, fmt.Errorf("the signature vouches for manifest %s, not this artifact's %s", d, v.Manifest)
		}
		message = s.Payload
	}
	if len(s.Signature) == 0 {
		return Key{}, fmt.Errorf("empty signature")
	}
	for _, k := range keys {
		if VerifySignature(k.Public, message, s.Signature) == nil {
			return k, nil
		}
	}
	what := "the module's bytes"
	if s.Payload != nil {
		what = "its payload"
	}
	return Key{}, fmt.Errorf("does not verify over %s with any trusted key: made by another key, or over other bytes", what)
}

func (p *Policy) key(name string) (Key, bool) {
	for _, k := range p.Keys {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

func (p *Policy) names(keys []Key) string {
	if len(keys) == 0 {
		return "no key (the trust policy lists none)"
	}
	var s []string
	for _, k := range keys {
		s = append(s, fmt.Sprintf("%s (%s)", k.Name, KeyID(k.Public)))
	}
	return "key " + strings.Join(s, " or ")
}
