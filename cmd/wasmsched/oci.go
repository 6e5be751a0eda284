package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/source"
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
// policy artifact.
func pushOCI(ctx context.Context, ref, path string, module []byte, rev api.Revision, opts source.OCIOptions, out io.Writer) error {
	if _, err := checkModule(ctx, "oci", module, rev); err != nil {
		return fmt.Errorf("%s does not load, nothing pushed: %w", path, err)
	}
	pinned, err := source.PushOCI(ctx, ref, module, nil, opts)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "pushed %s\nmodule:\n  sha256: %s\n  oci: %s%s\n", pinned, source.Digest(module), source.OCIScheme, pinned)
	return err
}

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
