// Command sdkproxy serves the SDK modules of this checkout (abi, guest) at
// the version the root go.mod requires them at, from a module proxy on
// disk, and prints the environment that builds a module outside the
// workspace against it: guest/ or abi/ on their own, or a policy author's
// module. `make sdk-proxy` runs it; guest/COMPATIBILITY.md says when that
// is needed.
//
//	go run ./internal/sdkmod/sdkproxy DIR
//
// It writes DIR/proxy and prints shell exports that point GOPROXY at it
// first, then at the module cache in use and the proxies in use, and
// GOMODCACHE at DIR/modcache: a module cache of its own, so that a version
// served from the work tree never lands in the user's cache, where a later
// edit would make it a checksum mismatch.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wasmsched/wasmsched/internal/sdkmod"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: sdkproxy DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "sdkproxy:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return err
	}
	mods, err := sdkmod.Modules(root)
	if err != nil {
		return err
	}
	proxy := filepath.Join(dir, "proxy")
	if err := os.RemoveAll(proxy); err != nil {
		return err
	}
	if err := sdkmod.WriteProxy(proxy, root, mods); err != nil {
		return err
	}
	for _, m := range mods {
		fmt.Fprintf(os.Stderr, "sdkproxy: %s@%s from %s/\n", m.Path, m.Version, m.Dir)
	}
	env, err := sdkmod.Env(proxy, filepath.Join(dir, "modcache"))
	if err != nil {
		return err
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Printf("export %s='%s'\n", k, v)
	}
	return nil
}
