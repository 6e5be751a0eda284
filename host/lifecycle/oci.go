package lifecycle

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/host/source"
)

// Modules from OCI registries (docs/policy-oci.md).
//
// A revision naming oci://REGISTRY/REPO@sha256:... is fetched like any
// other, on the revision's fetch goroutine, never on a scheduling cycle:
// the module cache first (by the module's sha256: bytes read back are
// checked against it, so a hit is the module whatever registry it came
// from), else a pull bounded in time and size (source.FetchOCI), whose
// module is then kept in the cache. A restart while the registry is down
// serves from the cache what was pulled before.

// ociFetcher pulls modules and keeps them in the module cache.
type ociFetcher struct {
	cache  *source.Cache // nil: none
	opts   source.OCIOptions
	logger klog.Logger
}

func (f ociFetcher) fetch(ctx context.Context, ref, sha256 string) (source.Version, error) {
	return f.fetchWith(ctx, ref, sha256, func(context.Context) (authn.Keychain, error) { return f.opts.Keychain, nil })
}

// fetchWith is fetch with the credentials keychain returns, asked only
// when the module is not cached.
func (f ociFetcher) fetchWith(ctx context.Context, ref, sha256 string, keychain func(context.Context) (authn.Keychain, error)) (source.Version, error) {
	if f.cache != nil {
		if v, err := f.cache.Get(sha256); err == nil {
			v.Origin = "oci " + ref + " (" + v.Origin + ")"
			f.cachedSignatures(ctx, &v, ref, sha256, keychain)
			return v, nil
		}
	}
	opts := f.opts
	k, err := keychain(ctx)
	if err != nil {
		return source.Version{}, fmt.Errorf("oci %s: %w", ref, err)
	}
	opts.Keychain = k
	v, err := source.FetchOCI(ctx, ref, sha256, opts)
	if err != nil {
		return source.Version{}, err
	}
	if f.cache != nil {
		if err := f.cache.Put(v.Module); err != nil {
			f.logger.Error(err, "Could not keep the pulled module in the module cache: a restart with the registry down could not serve it", "oci", ref)
		} else if err := f.cache.PutSignatures(sha256, v.Manifest, v.Signatures); err != nil {
			f.logger.Error(err, "Could not keep the pulled module's signatures in the module cache: a restart with the registry down could not check them", "oci", ref)
		}
	}
	return v, nil
}

// sigRefreshTimeout bounds reading a cached module's signatures again from
// its registry.
const sigRefreshTimeout = 30 * time.Second

// cachedSignatures gives a module read from the cache its signatures: read
// again from the registry (a module re-signed with a new key during a
// rotation is seen at the next load), else, the registry being down, those
// kept beside it when it was pulled.
func (f ociFetcher) cachedSignatures(ctx context.Context, v *source.Version, ref, sha256 string, keychain func(context.Context) (authn.Keychain, error)) {
	d, err := source.ParseOCIReference(ref)
	if err != nil {
		return
	}
	v.Manifest = d.DigestStr()
	opts := f.opts
	opts.Timeout = min(sigRefreshTimeout, max(opts.Timeout, 0))
	if opts.Timeout == 0 {
		opts.Timeout = sigRefreshTimeout
	}
	k, err := keychain(ctx)
	if err == nil {
		opts.Keychain = k
		var sigs []source.Signature
		if sigs, err = source.FetchOCISignatures(ctx, d, opts); err == nil {
			v.Signatures = sigs
			if err := f.cache.PutSignatures(sha256, v.Manifest, sigs); err != nil {
				f.logger.Error(err, "Could not keep the module's signatures in the module cache", "oci", ref)
			}
			return
		}
	}
	manifest, sigs, cerr := f.cache.Signatures(sha256)
	if cerr != nil {
		f.logger.Error(cerr, "Could not read the cached module's signatures", "oci", ref)
		return
	}
	if manifest == v.Manifest {
		v.Signatures = sigs
	}
	f.logger.Info("Signatures of the cached module read from the module cache: the registry did not answer", "oci", ref, "err", err)
}

// ociSource is a static policy's module in a registry: pulled once (the
// reference is pinned), retried with backoff (1s doubling to 5m, with
// jitter) until it succeeds.
type ociSource struct {
	f           ociFetcher
	ref, sha256 string
	// keychain gives the pull secret's credentials (nil: anonymous).
	keychain func(context.Context) (authn.Keychain, error)
	// resolve, for a tag (allowTag), gives the pinned reference and module
	// to fetch (staticStore.pinTag); nil: ref is pinned.
	resolve func(context.Context) (ref, sha256 string, err error)
}

func (s ociSource) Run(ctx context.Context, h source.Handlers) {
	defer func() { <-ctx.Done() }()
	wait := time.Second
	for {
		var v source.Version
		var err error
		ref, sha256 := s.ref, s.sha256
		if s.resolve != nil {
			ref, sha256, err = s.resolve(ctx)
		}
		switch {
		case err != nil:
		case s.keychain != nil:
			v, err = s.f.fetchWith(ctx, ref, sha256, s.keychain)
		default:
			v, err = s.f.fetch(ctx, ref, sha256)
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			if h.Version != nil {
				h.Version(v)
			}
			return
		}
		if h.Error != nil {
			h.Error(err)
		}
		t := time.NewTimer(wait/2 + rand.N(wait/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Minute)
	}
}

// registryTransport trusts the system roots and the PEM certificates in
// file.
func registryTransport(file string) (http.RoundTripper, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}

// pullSecret reads the dockerconfigjson Secret name in namespace as
// registry credentials.
func pullSecret(ctx context.Context, kube kubernetes.Interface, namespace, name string) (authn.Keychain, error) {
	if kube == nil {
		return nil, fmt.Errorf("pull secret %s/%s: no client to read it", namespace, name)
	}
	sec, err := kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("pull secret %s/%s: %w", namespace, name, err)
	}
	if sec.Type != v1.SecretTypeDockerConfigJson {
		return nil, fmt.Errorf("pull secret %s/%s: of type %q, not %s", namespace, name, sec.Type, v1.SecretTypeDockerConfigJson)
	}
	k, err := source.DockerConfigKeychain(sec.Data[v1.DockerConfigJsonKey])
	if err != nil {
		return nil, fmt.Errorf("pull secret %s/%s: %w", namespace, name, err)
	}
	return k, nil
}
