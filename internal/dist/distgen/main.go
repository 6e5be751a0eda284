// Command distgen packs the CLI binaries make dist built into release
// archives, SHA256SUMS and a krew manifest (internal/dist):
//
//	distgen -version v0.1.0 -bin bin/dist/build -out bin/dist [-extra README.md]
//
// The binaries are <bin>/<os>-<arch>/wasmsched[.exe]. Every timestamp is
// SOURCE_DATE_EPOCH.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/internal/dist"
)

func main() {
	version := flag.String("version", "", "the release version (v0.1.0)")
	bin := flag.String("bin", "bin/dist/build", "the folder of <os>-<arch>/ binaries")
	out := flag.String("out", "bin/dist", "where the archives go")
	extra := flag.String("extra", "", "comma-separated files to add to every archive")
	base := flag.String("url", "", "where the archives are downloaded from (krew); default the GitHub release of -version")
	flag.Parse()
	if err := run(*version, *bin, *out, *extra, *base); err != nil {
		fmt.Fprintln(os.Stderr, "distgen:", err)
		os.Exit(1)
	}
}

func run(version, bin, out, extra, base string) error {
	if version == "" {
		return fmt.Errorf("-version is required")
	}
	if base == "" {
		base = "https://github.com/wasmsched/wasmsched/releases/download/" + version
	}
	created := time.Unix(0, 0).UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		secs, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%q: %v", s, err)
		}
		created = time.Unix(secs, 0).UTC()
	}
	var extras []string
	if extra != "" {
		extras = strings.Split(extra, ",")
	}
	var archives []string
	for _, p := range dist.Platforms {
		exe := filepath.Join(bin, p.OS+"-"+p.Arch, p.Exe())
		a, err := dist.Pack(out, version, p, exe, extras, created)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		archives = append(archives, a)
	}
	sums, err := dist.WriteSums(out, archives)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "wasmsched.krew.yaml"), []byte(dist.KrewManifest(version, base, sums)), 0o644); err != nil {
		return err
	}
	for _, a := range archives {
		fi, err := os.Stat(a)
		if err != nil {
			return err
		}
		fmt.Printf("%s\t%.1f MiB\n", filepath.Base(a), float64(fi.Size())/(1<<20))
	}
	fmt.Printf("%s: SHA256SUMS, wasmsched.krew.yaml\n", out)
	return nil
}
