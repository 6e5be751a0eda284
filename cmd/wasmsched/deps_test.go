package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The policy author's CLI stays small: nothing of the control plane (etcd,
// kube-apiserver, the scheduler's command) may be linked into it. Those
// belong to cmd/wasmsched-up, which `make run` starts. Linking them made
// this binary 165 MB instead of about 50 MB, and its cold build minutes
// longer.
func TestNoControlPlane(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{
		"go.etcd.io/",                   // etcd, its client, bbolt, raft
		"k8s.io/apiserver/pkg/server",   // the generic API server
		"k8s.io/apiserver/pkg/storage/", // its storage backends
		"k8s.io/kubernetes/cmd/",        // kube-apiserver, kube-scheduler's command
		"github.com/wasmsched/wasmsched/internal/controlplane",
		"github.com/wasmsched/wasmsched/internal/demo",
	}
	var found []string
	for _, pkg := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(pkg, f) {
				found = append(found, pkg)
				break
			}
		}
	}
	if len(found) > 0 {
		t.Errorf("cmd/wasmsched links %d packages of the control plane; move what needs them to cmd/wasmsched-up:\n%s",
			len(found), strings.Join(found, "\n"))
	}
}
