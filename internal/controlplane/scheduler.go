package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"k8s.io/component-base/configz"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedulerconfig "k8s.io/kubernetes/cmd/kube-scheduler/app/config"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"

	"github.com/wasmsched/wasmsched/internal/tmpdir"
)

// SchedulerOptions configures [StartScheduler].
type SchedulerOptions struct {
	// Kubeconfig is the path of a kubeconfig for the API server, for example
	// one written by [ControlPlane.WriteKubeconfig]. Required unless
	// ConfigFile is set. With ConfigFile, the file's clientConnection.kubeconfig
	// decides where the scheduler connects, and Kubeconfig (if set) is only
	// used to check requests to the secure port.
	Kubeconfig string

	// ConfigFile is the path of a KubeSchedulerConfiguration file, as
	// kube-scheduler's --config. Empty means a minimal one: default profile,
	// clientConnection.kubeconfig set to Kubeconfig, leader election off.
	// Leader election must be off: see [StartScheduler].
	ConfigFile string

	// RegistryOptions registers out-of-tree plugins, e.g.
	// app.WithPlugin(name, factory). A profile in ConfigFile enables them.
	RegistryOptions []app.Option

	// SecurePort is the port of the scheduler's HTTPS endpoint (healthz,
	// metrics) on 127.0.0.1; 0 serves nothing.
	SecurePort int
}

// Scheduler is a kube-scheduler running in this process. Only one may run
// at a time. Its methods are safe for concurrent use.
type Scheduler struct {
	cancel context.CancelFunc
	done   chan struct{}
	dir    string

	mu      sync.Mutex
	err     error
	stopped bool

	stopOnce sync.Once
}

// StartScheduler runs kube-scheduler in-process, the way its command does
// (app.Setup, then app.Run) but without the command's process-wide signal
// handler and logging set-up. It returns once the scheduler is set up; it
// starts scheduling as soon as its informers have synced, shortly after.
// ctx supplies the logger; cancelling ctx after StartScheduler returns does
// not stop the scheduler: call Stop.
//
// Leader election is refused: when kube-scheduler stops while leading, it
// calls os.Exit(0), which would end the whole process.
func StartScheduler(ctx context.Context, opts SchedulerOptions) (*Scheduler, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &Scheduler{done: make(chan struct{})}
	configFile := opts.ConfigFile
	if configFile == "" {
		if opts.Kubeconfig == "" {
			return nil, errors.New("controlplane: StartScheduler needs Kubeconfig or ConfigFile")
		}
		dir, err := tmpdir.Make("wasmsched-scheduler-")
		if err != nil {
			return nil, fmt.Errorf("controlplane: %w", err)
		}
		s.dir = dir
		configFile = filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(configFile, minimalSchedulerConfig(opts.Kubeconfig), 0o600); err != nil {
			s.removeDir()
			return nil, fmt.Errorf("controlplane: %w", err)
		}
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	cc, sched, err := setup(runCtx, configFile, opts)
	if err != nil {
		cancel()
		s.removeDir()
		return nil, err
	}

	go func() {
		defer close(s.done)
		err := app.Run(runCtx, cc, sched)
		// Run registers its configuration under this name and never
		// removes it; without this the next Run in the process fails.
		configz.Delete("componentconfig")
		s.mu.Lock()
		defer s.mu.Unlock()
		// Without leader election Run always returns an error, also after
		// a requested stop ("finished without leader elect").
		if !s.stopped {
			s.err = err
		}
	}()
	return s, nil
}

// setup builds kube-scheduler as its command would, from configFile, with
// leader election refused. The scheduler's informers and event broadcaster
// live on ctx, so it must be the long-lived one.
func setup(ctx context.Context, configFile string, opts SchedulerOptions) (*schedulerconfig.CompletedConfig, *scheduler.Scheduler, error) {
	o := options.NewOptions()
	// As the command does after parsing flags; Setup would otherwise do it
	// with a warning. There are no flags, so this applies the defaults.
	if err := o.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, nil, fmt.Errorf("controlplane: %w", err)
	}
	o.ConfigFile = configFile
	// No metrics options: without flags they only apply their defaults,
	// and applying them logs an error on every start ("The manifest file
	// is empty, ignoring." without an allow-list, "empty allow-list mapping
	// supplied" with an empty one). Apply and Validate accept nil.
	o.Metrics = nil
	o.SecureServing.BindPort = opts.SecurePort
	if opts.SecurePort != 0 {
		o.SecureServing.BindAddress = net.IPv4(127, 0, 0, 1)
		o.Authentication.RemoteKubeConfigFile = opts.Kubeconfig
		o.Authorization.RemoteKubeConfigFile = opts.Kubeconfig
	}
	cc, sched, err := app.Setup(ctx, o, opts.RegistryOptions...)
	if err == nil && cc.LeaderElection != nil {
		err = errors.New("leader election must be disabled (leaderElection.leaderElect: false): " +
			"kube-scheduler exits the process when it stops while leading")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("controlplane: set up kube-scheduler: %w", err)
	}
	return cc, sched, nil
}

// PreparedScheduler is a kube-scheduler built but not scheduling: its
// informers feed its cache, and a test drives its profiles' frameworks
// itself (Scheduler.SchedulePod, the frameworks' Run* methods).
type PreparedScheduler struct {
	// Scheduler is the scheduler, its profiles in Scheduler.Profiles.
	Scheduler *scheduler.Scheduler
	cancel    context.CancelFunc
	stopOnce  sync.Once
}

// PrepareScheduler builds kube-scheduler from opts.ConfigFile (required)
// as StartScheduler would, starts its informers and waits until they have
// synced, but does not start scheduling. Stop releases it.
func PrepareScheduler(ctx context.Context, opts SchedulerOptions) (*PreparedScheduler, error) {
	if opts.ConfigFile == "" {
		return nil, errors.New("controlplane: PrepareScheduler needs ConfigFile")
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cc, sched, err := setup(runCtx, opts.ConfigFile, opts)
	if err != nil {
		cancel()
		return nil, err
	}
	cc.InformerFactory.Start(runCtx.Done())
	if cc.DynInformerFactory != nil {
		cc.DynInformerFactory.Start(runCtx.Done())
	}
	cc.InformerFactory.WaitForCacheSync(runCtx.Done())
	if cc.DynInformerFactory != nil {
		cc.DynInformerFactory.WaitForCacheSync(runCtx.Done())
	}
	if err := sched.WaitForHandlersSync(runCtx); err != nil {
		cancel()
		return nil, fmt.Errorf("controlplane: kube-scheduler's event handlers: %w", err)
	}
	return &PreparedScheduler{Scheduler: sched, cancel: cancel}, nil
}

// Stop stops the informers and the scheduler's background work, and closes
// the profiles' plugins, as a running scheduler does when it stops (a
// plugin that keeps state, such as WasmPolicy's probation marks, must see
// the stop). Later calls do nothing.
func (p *PreparedScheduler) Stop() {
	p.stopOnce.Do(func() {
		p.cancel()
		_ = p.Scheduler.Profiles.Close()
	})
}

func minimalSchedulerConfig(kubeconfig string) []byte {
	// strconv.Quote gives a JSON string, which is valid YAML.
	return []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: ` + strconv.Quote(kubeconfig) + `
leaderElection:
  leaderElect: false
`)
}

// Done is closed when the scheduler has stopped, after Stop or by itself
// (for example when its secure port is taken).
func (s *Scheduler) Done() <-chan struct{} { return s.done }

// Err reports why the scheduler stopped by itself; it is nil while it runs
// and after a stop requested by Stop.
func (s *Scheduler) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Stop stops the scheduler and waits until it has returned; later calls do
// nothing.
func (s *Scheduler) Stop() {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		s.cancel()
		<-s.done
		s.removeDir()
	})
}

func (s *Scheduler) removeDir() {
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}
