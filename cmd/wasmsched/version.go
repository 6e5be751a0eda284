package main

import (
	"fmt"
	"runtime"

	"k8s.io/component-base/version"

	"github.com/wasmsched/wasmsched/host/engine"
)

func versionString() string {
	return fmt.Sprintf("wasmsched (kubernetes %s, policy ABI %d, %s)", version.Get().GitVersion, engine.ABIVersion, runtime.Version())
}
