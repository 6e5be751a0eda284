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
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/wasmsched/wasmsched/host/plugin"
	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/demo"
)

// errDemoUnmet is returned by `up --demo --exit` when a pod did not end as
// expected.
var errDemoUnmet = errors.New("demo: some pods did not end as expected (see the table)")

func runUp(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", filepath.Join(os.TempDir(), "wasmsched-up"), "directory for the kubeconfig, scheduler configuration and logs")
	policies := fs.String("policies", "bin/policies", "directory holding the example policies (<name>.wasm)")
	config := fs.String("config", "", "KubeSchedulerConfiguration to run instead of the generated one (its clientConnection.kubeconfig is replaced)")
	runDemo := fs.Bool("demo", false, "create demo nodes and pods and print where they land")
	exit := fs.Bool("exit", false, "with --demo: stop after the table; exit 0 only if every pod ended as expected")
	timeout := fs.Duration("timeout", 90*time.Second, "with --demo: how long to wait for pods to settle")
	port := fs.Int("scheduler-port", 0, "serve the scheduler's /metrics and /healthz on this port of 127.0.0.1 (0: off)")
	verbosity := fs.Int("v", 0, "log verbosity of the control plane and scheduler (logs go to DIR/up.log)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if *exit && !*runDemo {
		return errors.New("--exit needs --demo")
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(*dir, "up.log")
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
	cp, err := controlplane.Start(ctx, controlplane.Options{Verbosity: *verbosity, Logf: func(format string, args ...any) {
		fmt.Fprintf(logFile, format+"\n", args...)
	}})
	restore()
	if err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	defer cp.Stop()
	toFile()
	kubeconfig := filepath.Join(*dir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}

	cfg, err := schedulerConfig(*config, kubeconfig, *policies)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(*dir, "scheduler-config.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return err
	}
	sched, err := controlplane.StartScheduler(ctx, controlplane.SchedulerOptions{
		Kubeconfig:      kubeconfig,
		ConfigFile:      cfgPath,
		RegistryOptions: []app.Option{app.WithPlugin(plugin.Name, plugin.New)},
		SecurePort:      *port,
	})
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	defer sched.Stop()
	toFile()
	fmt.Fprintf(stdout, "control plane and scheduler ready in %.1fs\n", time.Since(started).Seconds())
	fmt.Fprintf(stdout, "  kubeconfig:       %s\n", kubeconfig)
	fmt.Fprintf(stdout, "  scheduler config: %s\n", cfgPath)
	if *port != 0 {
		fmt.Fprintf(stdout, "  metrics:          https://127.0.0.1:%d/metrics\n", *port)
	}

	if *runDemo {
		pods, err := demo.Create(ctx, cp.Client())
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "demo: created %d nodes in 3 zones and %d pods in namespace %s; waiting for them to settle\n", len(demo.Nodes()), len(pods), demo.Namespace)
		rows, err := demo.Settle(ctx, cp.Client(), pods, *timeout)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout)
		demo.PrintTable(stdout, rows)
		fmt.Fprintln(stdout)
		if *exit {
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
func schedulerConfig(path, kubeconfig, policies string) ([]byte, error) {
	if path == "" {
		return demo.SchedulerConfig(kubeconfig, policies)
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
