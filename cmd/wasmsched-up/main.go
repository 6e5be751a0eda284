// Command wasmsched-up runs a Kubernetes control plane inside one process
// (etcd, kube-apiserver and kube-scheduler with the WasmPolicy plugin, see
// internal/controlplane) and, with --demo, places the demo pods of
// internal/demo with the example policies. It is what `make run` starts.
//
// It is a command of its own, apart from the policy author's CLI
// (cmd/wasmsched), because the control plane links the whole Kubernetes
// server tree: this binary is about 165 MB and takes minutes to build cold,
// which `wasmsched eval` and `wasmsched test` should not cost.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/plugin"
	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/demo"
)

const usage = `Usage: wasmsched-up [--demo [--exit]] [--policies DIR] [--config FILE] [--dir DIR]

Starts etcd, kube-apiserver and kube-scheduler (with the WasmPolicy plugin)
in this process and serves until Ctrl-C. With --demo it creates the demo
nodes and pods and prints where they land (make run).

`

// errDemoUnmet is returned by `wasmsched-up --demo --exit` when a pod did
// not end as expected.
var errDemoUnmet = errors.New("demo: some pods did not end as expected (see the table)")

// errUsage is returned for a command line the flags refused; they have
// printed why.
var errUsage = errors.New("usage")

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes a command line and returns the exit code: 0, 1 after an
// error (printed as one line on stderr), 2 for a bad command line.
func run(args []string, stdout, stderr io.Writer) int {
	switch err := runUp(args, stdout, stderr); {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintf(stderr, "wasmsched-up: %v\n", err)
		return 1
	}
}

// options are the command line's settings.
type options struct {
	dir, policies, config string
	demo, exit            bool
	timeout               time.Duration
	port, verbosity       int
}

// parseArgs reads the command line. A refused flag has been printed with
// the usage: errUsage. For -h it returns nil options.
func parseArgs(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("wasmsched-up", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.dir, "dir", filepath.Join(os.TempDir(), "wasmsched-up"), "directory for the kubeconfig, scheduler configuration and logs")
	fs.StringVar(&o.policies, "policies", "bin/policies", "directory holding the example policies (<name>.wasm)")
	fs.StringVar(&o.config, "config", "", "KubeSchedulerConfiguration to run instead of the generated one (its clientConnection.kubeconfig is replaced)")
	fs.BoolVar(&o.demo, "demo", false, "create demo nodes and pods and print where they land")
	fs.BoolVar(&o.exit, "exit", false, "with --demo: stop after the table; exit 0 only if every pod ended as expected")
	fs.DurationVar(&o.timeout, "timeout", 90*time.Second, "with --demo: how long to wait for pods to settle")
	fs.IntVar(&o.port, "scheduler-port", 0, "serve the scheduler's /metrics and /healthz on this port of 127.0.0.1 (0: off)")
	fs.IntVar(&o.verbosity, "v", 0, "log verbosity of the control plane and scheduler (logs go to DIR/up.log)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil
		}
		return nil, errUsage
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.exit && !o.demo {
		return nil, errors.New("--exit needs --demo")
	}
	return o, nil
}

func runUp(args []string, stdout, stderr io.Writer) error {
	o, err := parseArgs(args, stderr)
	if o == nil {
		return err
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(o.dir, "up.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	// The API server and the scheduler apply their own logging
	// configuration when they start; route klog to the file again after
	// each.
	toFile := func() {
		klog.LogToStderr(false)
		klog.SetOutput(logFile)
	}
	toFile()
	defer klog.Flush()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	fmt.Fprintf(stdout, "starting etcd and kube-apiserver in-process (logs: %s)\n", logPath)
	// Kubernetes server code writes some start-up lines straight to the
	// process's standard error; keep them in the log file too.
	restore := redirectStderr(logFile)
	cp, err := controlplane.Start(ctx, controlplane.Options{Verbosity: o.verbosity, Logf: func(format string, args ...any) {
		fmt.Fprintf(logFile, format+"\n", args...)
	}})
	restore()
	if err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	defer cp.Stop()
	toFile()
	kubeconfig := filepath.Join(o.dir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}

	if o.config == "" {
		// The demo's policies are SchedulingPolicies, so that `wasmsched
		// push`, `rollback` and `status` work against this cluster.
		if err := demo.Install(ctx, cp.RestConfig(), o.policies); err != nil {
			return err
		}
	} else if err := api.Install(ctx, dynamic.NewForConfigOrDie(cp.RestConfig())); err != nil {
		return err
	}
	cfg, err := schedulerConfig(o.config, kubeconfig)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(o.dir, "scheduler-config.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return err
	}
	sched, err := controlplane.StartScheduler(ctx, controlplane.SchedulerOptions{
		Kubeconfig:      kubeconfig,
		ConfigFile:      cfgPath,
		RegistryOptions: []app.Option{app.WithPlugin(plugin.Name, plugin.New)},
		SecurePort:      o.port,
	})
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	defer sched.Stop()
	toFile()
	fmt.Fprintf(stdout, "control plane and scheduler ready in %.1fs\n", time.Since(started).Seconds())
	fmt.Fprintf(stdout, "  kubeconfig:       %s\n", kubeconfig)
	fmt.Fprintf(stdout, "  scheduler config: %s\n", cfgPath)
	if o.config == "" {
		fmt.Fprintf(stdout, "  policies:         SchedulingPolicies in %s (wasmsched status --kubeconfig %s --namespace %s)\n", demo.PolicyNamespace, kubeconfig, demo.PolicyNamespace)
	}
	// How each profile selects its policies: a policy pushed with another
	// label is never loaded.
	profiles, err := demo.DescribeProfiles(cfg)
	if err != nil {
		return err
	}
	for _, p := range profiles {
		fmt.Fprintf(stdout, "  %s\n", p)
	}
	if o.port != 0 {
		fmt.Fprintf(stdout, "  metrics:          https://127.0.0.1:%d/metrics\n", o.port)
	}

	if o.demo {
		pods, err := demo.Create(ctx, cp.Client())
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "demo: created %d nodes in 3 zones and %d pods in namespace %s; waiting for them to settle\n", len(demo.Nodes()), len(pods), demo.Namespace)
		rows, err := demo.Settle(ctx, cp.Client(), pods, o.timeout)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout)
		demo.PrintTable(stdout, rows)
		fmt.Fprintln(stdout)
		fmt.Fprintf(stdout, "why a pod is where it is, or Pending (make build-cli builds bin/wasmsched):\n  bin/wasmsched explain --kubeconfig %s -n %s train-h100\n  bin/wasmsched ui --kubeconfig %s    (the page: http://127.0.0.1:8087/)\n\n",
			kubeconfig, demo.Namespace, kubeconfig)
		if o.exit {
			if !demo.AllExpected(rows) {
				return errDemoUnmet
			}
			fmt.Fprintln(stdout, "demo: every pod ended as expected")
			return nil
		}
	}
	fmt.Fprintln(stdout, "serving; press Ctrl-C to stop")
	select {
	case <-ctx.Done():
	case <-sched.Done():
		if err := sched.Err(); err != nil {
			return fmt.Errorf("scheduler stopped: %w", err)
		}
	}
	fmt.Fprintln(stdout, "stopping")
	return nil
}

// schedulerConfig returns the demo configuration, or the user's with its
// kubeconfig pointed at the embedded control plane.
func schedulerConfig(path, kubeconfig string) ([]byte, error) {
	if path == "" {
		return demo.SchedulerConfig(kubeconfig)
	}
	return demo.WithKubeconfig(path, kubeconfig)
}

// redirectStderr points file descriptor 2 at f until the returned function
// is called. It does nothing where descriptors cannot be duplicated.
func redirectStderr(f *os.File) (restore func()) {
	saved, err := unix.Dup(2)
	if err != nil {
		return func() {}
	}
	if err := unix.Dup2(int(f.Fd()), 2); err != nil {
		unix.Close(saved)
		return func() {}
	}
	return func() {
		_ = unix.Dup2(saved, 2)
		unix.Close(saved)
	}
}
