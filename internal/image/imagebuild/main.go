// Command imagebuild writes the scheduler's OCI image layout and its
// oci-archive tarball from kube-scheduler binaries already built (make
// image, make image-all):
//
//	imagebuild -out bin/image -version v0.1.0 -revision $(git rev-parse HEAD) \
//	  -image 1.37:amd64=bin/1.37/linux-amd64/kube-scheduler,arm64=bin/1.37/linux-arm64/kube-scheduler \
//	  [-image 1.36:amd64=...] [-examples bin/policies]
//
// Every timestamp is SOURCE_DATE_EPOCH (seconds; make passes the commit's
// time), so two builds of one commit give the same digests.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/internal/image"
)

type images []string

func (i *images) String() string     { return strings.Join(*i, " ") }
func (i *images) Set(v string) error { *i = append(*i, v); return nil }

func main() {
	var specs images
	out := flag.String("out", "bin/image", "directory for the layout (oci/) and the archive")
	version := flag.String("version", "", "wasmsched's version (v0.1.0)")
	source := flag.String("source", "https://github.com/wasmsched/wasmsched", "org.opencontainers.image.source")
	revision := flag.String("revision", "", "org.opencontainers.image.revision (the commit)")
	ca := flag.String("ca", "/etc/ssl/certs/ca-certificates.crt", "the CA certificates to copy in")
	examples := flag.String("examples", "", "a folder of .wasm policies: also write each minor's -examples variant")
	flag.Var(&specs, "image", "MINOR:ARCH=BINARY[,ARCH=BINARY...] (repeatable)")
	flag.Parse()
	if err := run(*out, *version, *source, *revision, *ca, *examples, specs); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(out, version, source, revision, ca, examples string, specs []string) error {
	if version == "" || len(specs) == 0 {
		return fmt.Errorf("-version and at least one -image are required")
	}
	created := time.Unix(0, 0).UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		secs, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%q: %v", s, err)
		}
		created = time.Unix(secs, 0).UTC()
	}
	var policies map[string][]byte
	if examples != "" {
		files, _ := filepath.Glob(filepath.Join(examples, "*.wasm"))
		policies = map[string][]byte{}
		for _, f := range files {
			if strings.HasSuffix(f, ".tinygo.wasm") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			policies[filepath.Base(f)] = b
		}
		if len(policies) == 0 {
			return fmt.Errorf("-examples %s: no .wasm files (make examples writes them)", examples)
		}
	}
	var builds []image.Options
	for _, spec := range specs {
		minor, archs, ok := strings.Cut(spec, ":")
		if !ok {
			return fmt.Errorf("-image %q: want MINOR:ARCH=BINARY[,ARCH=BINARY...]", spec)
		}
		o := image.Options{Version: version, Minor: minor, Source: source, Revision: revision, Created: created, CABundle: ca}
		for _, a := range strings.Split(archs, ",") {
			arch, bin, ok := strings.Cut(a, "=")
			if !ok {
				return fmt.Errorf("-image %q: %q is not ARCH=BINARY", spec, a)
			}
			o.Images = append(o.Images, image.Image{Arch: arch, Binary: bin})
		}
		builds = append(builds, o)
		if policies != nil {
			o.Policies = policies
			builds = append(builds, o)
		}
	}
	dir := filepath.Join(out, "oci")
	tags, err := image.WriteLayout(dir, builds)
	if err != nil {
		return err
	}
	archive := filepath.Join(out, "wasmsched-kube-scheduler-"+version+".oci.tar")
	if err := image.WriteArchive(dir, archive, created); err != nil {
		return err
	}
	if err := image.Verify(dir); err != nil {
		return err
	}
	for _, t := range tags {
		fmt.Printf("%s\t%s\n", t.Tag, t.Digest)
	}
	sizes, err := image.Sizes(dir)
	if err != nil {
		return err
	}
	for _, s := range sizes {
		fmt.Printf("  %s linux/%s\t%.1f MiB compressed, %.1f MiB uncompressed\n", s.Tag, s.Arch, float64(s.Compressed)/(1<<20), float64(s.Uncompressed)/(1<<20))
	}
	fmt.Printf("layout %s, archive %s\n", dir, archive)
	return nil
}
