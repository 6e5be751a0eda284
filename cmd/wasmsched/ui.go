package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/wasmsched/wasmsched/host/explain"
	"github.com/wasmsched/wasmsched/host/explain/web"
)

const uiUsage = `Usage: wasmsched ui [--listen 127.0.0.1:8087] [--scheduler-namespace NS] [--kubeconfig PATH]

Serves a web page, through your kubeconfig, with the pods of the cluster
(pending first) and, for the pod you choose, what wasmsched explain says:
every node × every policy of its profile, a heat map of scores grouped by a
node label, the reasons, and what-ifs of another revision showing which
pending pods would move. The page is built into this binary; it loads
nothing from elsewhere. It listens on 127.0.0.1 unless --listen says
otherwise, and serves until Ctrl-C.

`

func runUI(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ui", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, uiUsage)
		fs.PrintDefaults()
	}
	listen := fs.String("listen", "127.0.0.1:8087", "address to serve on (port 0: any free port)")
	schedNS := fs.String("scheduler-namespace", defaultNamespace, "the scheduler's namespace: its SchedulingPolicies, status ConfigMaps and module chunks")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	c, err := connect(*kubeconfig, *schedNS)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serveUI(ctx, ln, &explain.Client{Kube: c.client, Dynamic: c.dyn, Namespace: *schedNS}, stdout)
}

// serveUI serves the page on ln until ctx ends.
func serveUI(ctx context.Context, ln net.Listener, x *explain.Client, stdout io.Writer) error {
	srv := web.New(x)
	defer srv.Close(context.Background())
	addr := ln.Addr().(*net.TCPAddr)
	var hosts []string // any, when listening on every address
	if !addr.IP.IsUnspecified() {
		hosts = []string{addr.IP.String(), "localhost", "127.0.0.1", "::1"}
	}
	hs := &http.Server{Handler: srv.Handler(hosts...), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "serving http://%s/ (Ctrl-C to stop)\n", net.JoinHostPort(uiHost(addr), fmt.Sprint(addr.Port)))
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return hs.Shutdown(sctx)
	case err := <-errc:
		return err
	}
}

// uiHost is the host to print for addr: 127.0.0.1 for an unspecified
// address.
func uiHost(addr *net.TCPAddr) string {
	if addr.IP == nil || addr.IP.IsUnspecified() {
		return "127.0.0.1"
	}
	return addr.IP.String()
}
