package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/host/trust"
)

// The trust policy (Args.Trust), checked in one place for every kind of
// policy: on the slot's loader, before a version compiles (loader.go's
// begin). A version refused is a load that failed with a *trust.Error:
// the Rejected condition says Untrusted, an Event PolicyUntrusted names
// the signatures and keys, wasmsched_policy_untrusted_total counts it, and
// what serves keeps serving. At a restart the last good revision goes
// through the same check, so one the trust policy now refuses is not
// served.

// EventUntrusted: a revision was refused by the trust policy.
const EventUntrusted = "PolicyUntrusted"

var untrustedTotal = metrics.NewCounterVec(&metrics.CounterOpts{
	Subsystem:      subsystem,
	Name:           "policy_untrusted_total",
	Help:           "Policy versions refused by the trust policy (no signature by a trusted key), by policy.",
	StabilityLevel: metrics.ALPHA,
}, []string{"policy"})

// keyTimeout bounds reading the trust policy's keys for one check.
const keyTimeout = 30 * time.Second

// truster checks versions against the trust policy; nil when there is
// none. Its methods are safe for concurrent use.
type truster struct {
	args      TrustArgs
	namespace string
	client    kubernetes.Interface
	logger    klog.Logger

	// verified remembers the signatures that let each module load, so the
	// module cache can keep them with a last good module (keepSignatures).
	verified sync.Map // digest -> source.Version without its module
}

func newTruster(a *Args, client kubernetes.Interface, logger klog.Logger) *truster {
	if a.Trust == nil {
		return nil
	}
	return &truster{args: *a.Trust.DeepCopy(), namespace: a.Namespace, client: client, logger: logger}
}

// policy reads the keys. A key that cannot be read or parsed is an error
// naming it: a trust policy is never silently weaker than configured.
func (t *truster) policy(ctx context.Context) (*trust.Policy, error) {
	p := &trust.Policy{Required: t.args.Mode != TrustOptional}
	if t.client == nil {
		return nil, errors.New("the trust policy's keys cannot be read: no client")
	}
	ctx, cancel := context.WithTimeout(ctx, keyTimeout)
	defer cancel()
	for _, k := range t.args.Keys {
		var pem []byte
		var where string
		if k.ConfigMap != "" {
			where = fmt.Sprintf("configmap %s/%s key %s", t.namespace, k.ConfigMap, k.Key)
			cm, err := t.client.CoreV1().ConfigMaps(t.namespace).Get(ctx, k.ConfigMap, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("trusted key %s (%s): %w", k.Name, where, err)
			}
			pem = []byte(cm.Data[k.Key])
			if len(pem) == 0 {
				pem = cm.BinaryData[k.Key]
			}
		} else {
			where = fmt.Sprintf("secret %s/%s key %s", t.namespace, k.Secret, k.Key)
			sec, err := t.client.CoreV1().Secrets(t.namespace).Get(ctx, k.Secret, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("trusted key %s (%s): %w", k.Name, where, err)
			}
			pem = sec.Data[k.Key]
		}
		if len(pem) == 0 {
			return nil, fmt.Errorf("trusted key %s (%s): no such key", k.Name, where)
		}
		pub, err := trust.ParsePublicKey(pem)
		if err != nil {
			return nil, fmt.Errorf("trusted key %s (%s): %w", k.Name, where, err)
		}
		p.Keys = append(p.Keys, trust.Key{Name: k.Name, Public: pub})
	}
	return p, nil
}

// check decides whether v may load for policy, demand narrowing the keys.
// A refusal, and keys that cannot be read, are *trust.Error: the version
// does not load.
func (t *truster) check(ctx context.Context, policy string, v source.Version, demand []string) error {
	p, err := t.policy(ctx)
	if err != nil {
		untrustedTotal.WithLabelValues(policy).Inc()
		return &trust.Error{Reason: err.Error()}
	}
	verdict, err := p.Check(v, demand)
	if err != nil {
		untrustedTotal.WithLabelValues(policy).Inc()
		return fmt.Errorf("policy %s: %w", policy, err)
	}
	if verdict.Unsigned {
		t.logger.Info("Policy module is not signed: loading it, as the trust policy is Optional", "policy", policy, "digest", v.Digest)
		return nil
	}
	t.logger.V(2).Info("Policy module signature verified", "policy", policy, "digest", v.Digest, "key", verdict.Key.Name, "keyID", trust.KeyID(verdict.Key.Public))
	t.verified.Store(v.Digest, source.Version{Digest: v.Digest, Manifest: v.Manifest, Signatures: v.Signatures})
	return nil
}

// keepSignatures puts the signatures a module was verified with beside it
// in the module cache, so a restart can check the cached module again.
func (t *truster) keepSignatures(c *source.Cache, digest string) {
	if t == nil || c == nil {
		return
	}
	if v, ok := t.verified.Load(digest); ok {
		sv := v.(source.Version)
		if err := c.PutSignatures(digest, sv.Manifest, sv.Signatures); err != nil {
			t.logger.Error(err, "Could not keep the module's signatures in the module cache", "digest", digest)
		}
	}
}

// isUntrusted reports whether err is a refusal by the trust policy.
func isUntrusted(err error) bool {
	var te *trust.Error
	return errors.As(err, &te)
}
