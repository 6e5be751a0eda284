// Command chartgen writes manifests/ from the Helm chart charts/wasmsched
// (make generate): one file per template, rendered as the release
// wasmsched in wasmsched-system for the default Kubernetes minor, so that
// the plain manifests and the chart cannot drift apart.
//
//	go run ./internal/chart/chartgen MINOR
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/wasmsched/wasmsched/internal/chart"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: chartgen MINOR (the default Kubernetes minor, make minors' first)")
		os.Exit(2)
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartgen: go env GOMOD:", err)
		os.Exit(1)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	names, err := chart.WriteManifests(root, os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartgen:", err)
		os.Exit(1)
	}
	fmt.Printf("manifests/: %s\n", strings.Join(names, " "))
}
