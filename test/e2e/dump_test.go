package e2e

import (
	"strings"
	"testing"
)

// TestSplitDump: the log before a Go process's SIGQUIT dump is kept whole,
// and of the dump only the goroutines with a frame in wasmsched's packages.
func TestSplitDump(t *testing.T) {
	out := `I1127 08:35:29.990000 1 schedule_one.go:314] "Successfully bound pod to node" pod="default/load-0001" node="edge-1"
SIGQUIT: quit
PC=0x47b1e1 m=0 sigcode=0

goroutine 0 gp=0x2a1c0e0 m=0 mp=0x2a1d640 [idle]:
runtime.futex(0x2a1d780, 0x80, 0x0, 0x0, 0x0, 0x0)
	/usr/local/go/src/runtime/sys_linux_amd64.s:557 +0x21

goroutine 1 gp=0xc000002380 m=nil [select, 3 minutes]:
k8s.io/kubernetes/pkg/scheduler.(*Scheduler).Run(0xc0001a2000, {0x1f2a9e8, 0xc0004b2000})
	/root/go/pkg/mod/k8s.io/kubernetes@v1.37.2/pkg/scheduler/scheduler.go:560 +0x1c5

goroutine 812 gp=0xc000e0b6c0 m=nil [chan receive, 3 minutes]:
github.com/wasmsched/wasmsched/host/policy.Load({0x1f2a9e8, 0xc0004b2000}, {{0xc0011a2000, 0x4}})
	/src/host/policy/policy.go:189 +0x2b4
github.com/wasmsched/wasmsched/host/lifecycle.(*Slot).begin.func1()
	/src/host/lifecycle/loader.go:270 +0x1f1
`
	log, dump := splitDump(out)
	if !strings.HasSuffix(log, `node="edge-1"`+"\n") || strings.Contains(log, "SIGQUIT") {
		t.Errorf("log part:\n%s", log)
	}
	if !strings.HasPrefix(dump, "goroutine 812 ") || !strings.Contains(dump, "policy.Load") || strings.Contains(dump, "goroutine 1 ") || strings.Contains(dump, "goroutine 0 ") {
		t.Errorf("dump part:\n%s", dump)
	}
	if log, dump := splitDump("no dump\n"); log != "no dump\n" || dump != "" {
		t.Errorf("without a dump: log %q, dump %q", log, dump)
	}
}
