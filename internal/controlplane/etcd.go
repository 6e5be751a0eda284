package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// startEtcd starts a single-member etcd in dir, listening on free loopback
// ports, and waits until it serves.
//
// This does what k8s.io/apiserver/pkg/storage/etcd3/testserver.RunEtcd does,
// with go.etcd.io/etcd/server/v3/embed directly: RunEtcd takes a testing.TB,
// which has an unexported method and so cannot be implemented outside the
// testing package, registers its shutdown with TB.Cleanup (the control plane
// must stop on Stop, not at the end of a test), and reports a late server
// error with TB.Error from a goroutine, which panics once a test has ended.
func startEtcd(ctx context.Context, dir string, logf func(string, ...any)) (*embed.Etcd, error) {
	var lastErr error
	// Free ports are found by listening and closing, so another process may
	// take one before etcd binds it; try a few times.
	for attempt := 0; attempt < 3; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cfg, err := etcdConfig(dir, logf)
		if err != nil {
			return nil, err
		}
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err
			if strings.Contains(err.Error(), "address already in use") {
				continue
			}
			return nil, err
		}
		select {
		case <-e.Server.ReadyNotify():
		case err, ok := <-e.Err():
			e.Close()
			if !ok || err == nil {
				err = errors.New("etcd stopped during start-up")
			}
			return nil, err
		case <-ctx.Done():
			e.Close()
			return nil, ctx.Err()
		case <-time.After(time.Minute):
			e.Close()
			return nil, errors.New("etcd did not become ready within a minute")
		}
		go func() {
			// Err is closed when the server stops.
			if err, ok := <-e.Err(); ok && err != nil {
				logf("etcd: %v", err)
			}
		}()
		return e, nil
	}
	return nil, lastErr
}

func etcdConfig(dir string, logf func(string, ...any)) (*embed.Config, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	client := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
	peer := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}

	cfg := embed.NewConfig()
	cfg.Dir = dir
	// Nothing is kept across runs, so durability buys nothing.
	cfg.UnsafeNoFsync = true
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// No metrics listener and no HTTP gateway beside gRPC: fewer ports.
	cfg.ListenMetricsUrls = nil
	cfg.EnableGRPCGateway = false

	// Errors only, through logf (etcd logs every start and stop at info).
	core := zapcore.NewCore(
		zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
		zapcore.AddSync(logfWriter{logf: logf, prefix: "etcd: "}),
		zapcore.ErrorLevel,
	)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(core))
	return cfg, nil
}

// etcdClientURL is the URL etcd clients connect to.
func etcdClientURL(e *embed.Etcd) string {
	return "http://" + e.Clients[0].Addr().String()
}

func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// logfWriter turns each Write into one logf call.
type logfWriter struct {
	logf   func(string, ...any)
	prefix string
}

func (w logfWriter) Write(p []byte) (int, error) {
	w.logf("%s%s", w.prefix, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
