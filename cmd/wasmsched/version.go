package main

import (
	"fmt"
	"runtime"
	"strings"

	"k8s.io/component-base/version"

	"github.com/wasmsched/wasmsched/host/engine"
)

// Version is wasmsched's release version, set when a release is built
// (make dist: -ldflags -X main.Version=v0.1.0); "dev" in a plain build.
var Version = "dev"

// versionString is what `wasmsched version` prints: the release, the
// policy ABI and SDK it speaks, the Kubernetes libraries and Go it was
// built with.
func versionString() string {
	var b strings.Builder
	fmt.Fprintf(&b, "wasmsched %s\n", Version)
	fmt.Fprintf(&b, "policy ABI: %d\n", engine.ABIVersion)
	fmt.Fprintf(&b, "policy SDK: %s %s\n", sdkModule, sdkVersion())
	fmt.Fprintf(&b, "kubernetes: %s\n", version.Get().GitVersion)
	fmt.Fprintf(&b, "go: %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return b.String()
}
