package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/plugin"
	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/demo"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// lifecycleStep is a command of the README's lifecycle block and what its
// comment says of it.
type lifecycleStep struct {
	args    []string
	comment string
}

// readmeLifecycle returns the commands between <!-- lifecycle --> and
// <!-- /lifecycle --> in README.md (continuations joined, comments split
// off, single quotes removed: the block quotes JSON without spaces).
func readmeLifecycle(t *testing.T) (kubeconfig string, steps []lifecycleStep) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testwasm.Root(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- lifecycle -->")
	block, _, ok2 := strings.Cut(rest, "<!-- /lifecycle -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no <!-- lifecycle --> block")
	}
	var lines []string
	cont := false
	for _, l := range strings.Split(block, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "```") {
			continue
		}
		if cont {
			lines[len(lines)-1] += " " + strings.TrimSuffix(l, "\\")
		} else {
			lines = append(lines, strings.TrimSuffix(l, "\\"))
		}
		cont = strings.HasSuffix(l, "\\")
	}
	for _, l := range lines {
		cmd, comment, _ := strings.Cut(l, " #")
		words := strings.Fields(cmd)
		switch {
		case len(words) == 2 && words[0] == "export":
			kubeconfig = strings.TrimPrefix(words[1], "KUBECONFIG=")
		case len(words) > 0 && words[0] == "bin/wasmsched":
			for i, w := range words {
				words[i] = strings.Trim(w, "'")
			}
			steps = append(steps, lifecycleStep{args: words[1:], comment: strings.TrimSpace(comment)})
		default:
			t.Fatalf("README lifecycle block: unexpected line %q", l)
		}
	}
	return kubeconfig, steps
}

// The README's lifecycle sequence, run against the demo's scheduler (as
// make run starts it, in-process here): status, an update of settings that
// serves, a module and settings refused with nothing written, and a
// rollback to the last good revision that serves again.
func TestREADMELifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and a scheduler")
	}
	kubeconfigShown, steps := readmeLifecycle(t)
	if kubeconfigShown != filepath.Join(os.TempDir(), "wasmsched-up", "kubeconfig") || len(steps) != 5 {
		t.Fatalf("README lifecycle: kubeconfig %q (want wasmsched-up's default), %d commands", kubeconfigShown, len(steps))
	}
	controlplane.QuietLogs()
	ctx := context.Background()
	cp, err := controlplane.Start(ctx, controlplane.Options{TB: t})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	policies := filepath.Join(dir, "policies")
	if err := os.Mkdir(policies, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range demo.Policies {
		if err := os.Symlink(testwasm.Path(t, "examples/"+p.Name), filepath.Join(policies, p.Name+".wasm")); err != nil {
			t.Fatal(err)
		}
	}
	if err := demo.Install(ctx, cp.RestConfig(), policies); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	cfg, err := demo.SchedulerConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// The demo's probation, shortened: the rollback needs a last good
	// revision.
	cfg = []byte(strings.Replace(string(cfg), "probation: "+demo.Probation, "probation: 2s", 1))
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := controlplane.StartScheduler(ctx, controlplane.SchedulerOptions{Kubeconfig: kubeconfig, ConfigFile: cfgPath,
		RegistryOptions: []app.Option{app.WithPlugin(plugin.Name, plugin.New)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	pc := &policyClient{t: t, cp: cp}
	original := pc.waitProven("zone")

	t.Setenv("KUBECONFIG", kubeconfig)
	zone := testwasm.Path(t, "examples/zone")
	for i, st := range steps {
		args := make([]string, len(st.args))
		for j, a := range st.args {
			switch a {
			case "bin/policies/zone.wasm":
				a = zone
			case "README.md":
				a = filepath.Join(testwasm.Root(t), "README.md")
			}
			args[j] = a
		}
		code, out, errs := runCLI(args...)
		refused := strings.HasPrefix(st.comment, "refused")
		switch {
		case refused && (code != 1 || !strings.Contains(errs, "nothing written")):
			t.Fatalf("step %d (%s): exit %d, stderr %q: want it refused with nothing written", i+1, strings.Join(st.args, " "), code, errs)
		case !refused && code != 0:
			t.Fatalf("step %d (%s): exit %d\n%s%s", i+1, strings.Join(st.args, " "), code, out, errs)
		}
		t.Logf("step %d: wasmsched %s\n%s%s", i+1, strings.Join(st.args, " "), out, errs)
		if i == 0 {
			for _, p := range demo.Policies {
				if !strings.Contains(out, p.Name) {
					t.Errorf("status does not list %s:\n%s", p.Name, out)
				}
			}
		}
		if i == 1 {
			// Once the update is proven (the last good revision), the
			// rollback goes back to the revision before it in the
			// history; before that, to the last good one, the original
			// too. Waiting makes the test take the longer way.
			pc.waitProven("zone")
		}
	}
	sp := pc.get("zone")
	if sp.Spec.Module != original.Module || string(sp.Spec.Settings) != string(original.Settings) {
		t.Fatalf("after the rollback the spec names %+v %s, want the original revision %+v %s", sp.Spec.Module, sp.Spec.Settings, original.Module, original.Settings)
	}
	if sp.Status.Serving == nil || sp.Status.Serving.Key != original.Key {
		t.Fatalf("after the rollback %+v serves, want the original revision %s", sp.Status.Serving, original.Key)
	}

	// The same cluster serves the path of a new policy (a control plane
	// and a scheduler started once for both).
	walkNewPolicy(t, cp, pc)
}

func dynamicFor(cp *controlplane.ControlPlane) dynamic.Interface {
	return dynamic.NewForConfigOrDie(cp.RestConfig())
}

// policyClient reads SchedulingPolicies for the lifecycle test.
type policyClient struct {
	t  *testing.T
	cp *controlplane.ControlPlane
}

func (pc *policyClient) get(name string) *api.SchedulingPolicy {
	pc.t.Helper()
	u, err := dynamicFor(pc.cp).Resource(api.GVR).Namespace(demo.PolicyNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		pc.t.Fatal(err)
	}
	sp, err := api.FromUnstructured(u)
	if err != nil {
		pc.t.Fatal(err)
	}
	return sp
}

// waitProven waits until the spec's revision serves and is the last good
// one, and returns it.
func (pc *policyClient) waitProven(name string) api.Revision {
	pc.t.Helper()
	var sp *api.SchedulingPolicy
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		sp = pc.get(name)
		want := api.RevisionOf(&sp.Spec).Key
		return sp.Status.LastGood != nil && sp.Status.LastGood.Key == want && sp.Status.Serving != nil && sp.Status.Serving.Key == want, nil
	})
	if err != nil {
		pc.t.Fatalf("%s: the spec's revision not serving and proven within a minute: %+v", name, sp.Status)
	}
	return *sp.Status.LastGood
}
