package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/explain"
	"github.com/wasmsched/wasmsched/host/policy"
	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/host/trust"
)

const pullUsage = `Usage:
  wasmsched pull REF -o P.wasm [--registry-ca FILE] [--timeout 2m]

Reads the policy module of the OCI artifact REF (oci://REGISTRY/REPO:TAG or
@sha256:..., the scheme optional; docs/policy-oci.md), checks it against
its layer's digest and writes it to P.wasm. Prints the pinned reference and
the module's sha256, what a SchedulingPolicy's spec.module names.
Credentials come from the Docker config (~/.docker/config.json,
$DOCKER_CONFIG), as docker login or crane auth login write them.

`

// ociOptions are the registry client's options: the Docker config's
// credentials and the system roots plus caFile ("" : none).
func ociOptions(caFile string, timeout time.Duration) (source.OCIOptions, error) {
	o := source.OCIOptions{Keychain: authn.DefaultKeychain, Timeout: timeout}
	if caFile == "" {
		return o, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return o, fmt.Errorf("--registry-ca: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return o, fmt.Errorf("--registry-ca %s: no PEM certificate in it", caFile)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	o.Transport = t
	return o, nil
}

// pushOCI is push --oci: the module, checked like any push, published as a
// policy artifact annotated with its ABI version, its SDK and its settings
// schema (schema: a JSON document, or nil), and signed with key (nil:
// unsigned).
func pushOCI(ctx context.Context, ref, path string, module []byte, rev api.Revision, schema []byte, key crypto.Signer, opts source.OCIOptions, out io.Writer) error {
	p, err := policy.Load(ctx, policy.Options{Name: "oci", Wasm: module, Settings: rev.Settings, Engine: explain.EngineConfig(rev), MaxInstances: 1})
	if err != nil {
		return fmt.Errorf("%s does not load, nothing pushed: %w", path, err)
	}
	info := p.Info()
	_ = p.Close(ctx)
	anns := map[string]string{
		source.OCIAnnotationABI: strconv.FormatUint(uint64(info.GetAbiVersion()), 10),
		source.OCIAnnotationSDK: info.GetSdk(),
	}
	if schema != nil {
		var buf bytes.Buffer
		if err := json.Compact(&buf, schema); err != nil {
			return fmt.Errorf("--settings-schema: not JSON: %w", err)
		}
		if buf.Len() > maxSchemaAnnotation {
			return fmt.Errorf("--settings-schema: %d bytes compacted, over the limit of %d for an annotation", buf.Len(), maxSchemaAnnotation)
		}
		anns[source.OCIAnnotationSchema] = buf.String()
	}
	pinned, err := source.PushOCI(ctx, ref, module, anns, opts)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(out, "pushed %s\nmodule:\n  sha256: %s\n  oci: %s%s\n", pinned, source.Digest(module), source.OCIScheme, pinned); err != nil {
		return err
	}
	if key == nil {
		return nil
	}
	payload := trust.SimpleSigningPayload(pinned.Context().Name(), pinned.DigestStr())
	sig, err := trust.Sign(key, payload)
	if err != nil {
		return err
	}
	if err := source.PushOCISignature(ctx, pinned, payload, sig, opts); err != nil {
		return fmt.Errorf("pushed, but not signed: %w", err)
	}
	_, err = fmt.Fprintf(out, "signed with key %s: %s\n", trust.KeyID(key.Public()), source.OCISignatureTag(pinned))
	return err
}

// maxSchemaAnnotation bounds the settings schema carried as an annotation
// (the scheduler reads manifests of at most 64 KiB).
const maxSchemaAnnotation = 32 << 10

func runPull(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pull", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, pullUsage)
		fs.PrintDefaults()
	}
	output := fs.String("o", "", "write the module to this file")
	caFile := fs.String("registry-ca", "", "PEM file of CA certificates trusted besides the system roots")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return errors.New("no reference given")
	case len(pos) > 1:
		return fmt.Errorf("unexpected argument %q (one reference at a time)", pos[1])
	case *output == "":
		return errors.New("-o FILE is required")
	}
	opts, err := ociOptions(*caFile, *timeout)
	if err != nil {
		return err
	}
	v, pinned, err := source.PullOCI(context.Background(), pos[0], opts)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*output, v.Module, 0o644); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "pulled %s (%d bytes) to %s\nmodule:\n  sha256: %s\n  oci: %s%s\n", pinned, len(v.Module), *output, v.Digest, source.OCIScheme, pinned)
	return err
}
