// Package controlplane runs a real Kubernetes control plane inside the
// current process: an embedded etcd, kube-apiserver and, on request,
// kube-scheduler. It exists for `wasmsched-up` and for end-to-end tests, so
// that neither needs a cluster, a container runtime or downloaded binaries.
//
// There are no kubelets and no controller manager: Nodes and Pods are plain
// API objects, nothing runs containers, and nothing removes taints or marks
// nodes ready. The API server serves only 127.0.0.1.
//
// The package must never be imported by policy, guest or ABI code: it pulls in
// the whole Kubernetes server tree (a cold build takes minutes).
//
// Process-wide effects a caller should know about:
//   - Kubernetes' test helpers, imported here, catch SIGINT at initialisation
//     (a Ctrl-C would stop every API server and leave the process running);
//     this package resets SIGINT to the default when it is initialised. A
//     program that wants to stop cleanly on Ctrl-C installs its own handler
//     and calls Stop.
//   - Start sets klog's global verbosity (see [Options.Verbosity]) and the
//     package silences gRPC's global logger when it is initialised.
//   - Only one [Scheduler] may run in a process at a time (kube-scheduler
//     registers global configz state); several control planes may.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	apiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"

	"github.com/wasmsched/wasmsched/internal/tmpdir"
)

// Options configures [Start]. The zero value is a working configuration:
// AlwaysAllow authorization, quiet logs, log lines discarded.
type Options struct {
	// Authorization is the API server's --authorization-mode, for example
	// "Node,RBAC" to check that a component works with least privilege.
	// Empty means the API server's default, AlwaysAllow. With RBAC, the
	// credentials of [ControlPlane.RestConfig] still belong to a member of
	// system:masters; act as someone else by setting rest.Config.Impersonate
	// on a copy (and [WriteKubeconfigFile] for a component that needs a file).
	Authorization string

	// ExtraFlags are further kube-apiserver flags, appended after the ones
	// Start sets (a later flag wins), e.g. "--feature-gates=...".
	ExtraFlags []string

	// Verbosity is the klog verbosity Start sets process-wide. 0 (the
	// default) keeps the API server to a few lines; 5 is what Kubernetes'
	// test helpers would otherwise select (about 10k lines per start).
	Verbosity int

	// Logf receives the control plane's own log lines (start-up progress,
	// the API server's contextual logs, etcd errors). It may be called from
	// any goroutine until Stop returns, never after. Nil means TB.Logf when
	// TB is set, else discard. klog's global output still goes to stderr.
	Logf func(format string, args ...any)

	// TB, when set, ties the control plane to a test: Logf defaults to
	// TB.Logf and Stop is registered with TB.Cleanup, so a test may skip
	// calling Stop. Start itself never calls TB.Fatal.
	TB testing.TB
}

// ControlPlane is a running etcd and kube-apiserver. Its methods are safe for
// concurrent use; Stop may be called more than once.
type ControlPlane struct {
	tb     *hostTB
	etcd   *embed.Etcd
	server apiservertesting.TestServer
	config *rest.Config
	client kubernetes.Interface
	root   string

	etcdClosing atomic.Bool
	stopOnce    sync.Once
}

// apiServerFlags are always passed to kube-apiserver.
var apiServerFlags = []string{
	// ServiceAccount: no controller creates the default service account, so
	// every Pod would be rejected. TaintNodesByCondition: every new Node would
	// get a not-ready NoSchedule taint that, without a kubelet or node
	// lifecycle controller, nothing ever removes.
	"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
	// Otherwise the API server keeps trying to publish 127.0.0.1 as the
	// endpoint of the kubernetes Service and logs the failures.
	"--endpoint-reconciler-type=none",
}

// Start starts etcd and kube-apiserver and returns once the API server is
// healthy and the default namespace exists (about 3 s on 2 cores). ctx is
// checked between start-up steps (the API server's own start cannot be
// interrupted and gives up after about a minute); cancelling ctx after Start
// returns does not stop the control plane: call Stop for that.
//
// The API server is Kubernetes' own test server
// (k8s.io/kubernetes/cmd/kube-apiserver/app/testing), run with an adapter
// in place of *testing.T so that it also works in a plain binary. That helper
// insists on an absolute path for its own source file (runtime.Caller), so
// binaries and tests that call Start must not be built with -trimpath. It
// does not read the file: Start brings its own serving certificate.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	logf := opts.Logf
	if logf == nil && opts.TB != nil {
		logf = opts.TB.Logf
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	quietGRPC()
	setVerbosity(opts.Verbosity)

	root, err := tmpdir.Make("wasmsched-controlplane-")
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	cp := &ControlPlane{tb: newHostTB("wasmsched-controlplane", root, logf), root: root}
	ok := false
	defer func() {
		if !ok {
			cp.teardown()
		}
	}()

	cp.etcd, err = startEtcd(ctx, filepath.Join(root, "etcd"), func(format string, args ...any) {
		// etcd reports its listeners closing as errors; nobody needs those.
		if !cp.etcdClosing.Load() {
			cp.tb.Logf(format, args...)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("controlplane: start etcd: %w", err)
	}

	flags, err := servingCertFlags(filepath.Join(root, "serving"))
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	flags = append(append([]string(nil), apiServerFlags...), flags...)
	if opts.Authorization != "" {
		flags = append(flags, "--authorization-mode="+opts.Authorization)
	}
	flags = append(flags, opts.ExtraFlags...)

	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = []string{etcdClientURL(cp.etcd)}

	if err := ctx.Err(); err != nil {
		return nil, err
	}
	server, err := cp.startAPIServer(flags, storage)
	if err != nil {
		return nil, fmt.Errorf("controlplane: start kube-apiserver: %w", err)
	}
	cp.server = server
	cp.config = rest.CopyConfig(server.ClientConfig)
	cp.client, err = kubernetes.NewForConfig(cp.config)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}

	ok = true
	if opts.TB != nil {
		opts.TB.Cleanup(cp.Stop)
	}
	logf("controlplane: kube-apiserver serving at %s", cp.config.Host)
	return cp, nil
}

// startAPIServer runs StartTestServer on its own goroutine, as the testing
// package runs a test: the helper may call FailNow, which ends the calling
// goroutine, and that must not be the caller's (in a CLI, the main goroutine).
// The helper cannot be interrupted; it gives up by itself after about a
// minute. On failure it tears down what it started before returning.
func (cp *ControlPlane) startAPIServer(flags []string, storage *storagebackend.Config) (apiservertesting.TestServer, error) {
	type result struct {
		server apiservertesting.TestServer
		err    error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		returned := false
		defer func() {
			if !returned {
				r.err = cp.tb.failure()
			}
			done <- r
		}()
		r.server, r.err = apiservertesting.StartTestServer(cp.tb, apiservertesting.NewDefaultTestServerOptions(), flags, storage)
		returned = true
	}()
	r := <-done
	return r.server, r.err
}

// RestConfig returns a copy of an admin configuration for the API server (a
// bearer token of a system:masters member and the CA of the server's
// loopback certificate, verified under the name apiserver-loopback-client).
func (cp *ControlPlane) RestConfig() *rest.Config {
	return rest.CopyConfig(cp.config)
}

// Client returns a client built from [ControlPlane.RestConfig].
func (cp *ControlPlane) Client() kubernetes.Interface {
	return cp.client
}

// WriteKubeconfig writes an admin kubeconfig for the control plane to path
// (mode 0600), with the CA and the token embedded. client-go and kubectl
// (which must be within one minor version of the linked Kubernetes) can use it.
func (cp *ControlPlane) WriteKubeconfig(path string) error {
	return WriteKubeconfigFile(path, cp.config)
}

// Stop shuts down kube-apiserver and etcd and removes their temporary
// directories. It blocks until they have stopped; later calls do nothing.
// Stop any Scheduler using this control plane first.
func (cp *ControlPlane) Stop() {
	cp.stopOnce.Do(cp.teardown)
}

// teardown releases whatever Start got to start, in reverse order.
func (cp *ControlPlane) teardown() {
	if cp.server.TearDownFn != nil {
		cp.server.TearDownFn()
	}
	cp.tb.runCleanups()
	if cp.etcd != nil {
		cp.etcdClosing.Store(true)
		cp.etcd.Close()
	}
	if err := os.RemoveAll(cp.root); err != nil && !errors.Is(err, os.ErrNotExist) {
		cp.tb.Logf("controlplane: %v", err)
	}
	cp.tb.close()
}
