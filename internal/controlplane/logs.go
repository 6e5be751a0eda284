package controlplane

import (
	"flag"
	"io"
	"os"
	"strconv"
	"sync"

	"google.golang.org/grpc/grpclog"
	"k8s.io/klog/v2"
)

var grpcLogOnce sync.Once

func init() {
	// grpclog.SetLoggerV2 is not synchronised with gRPC's own use of the
	// logger; the only moment that is surely safe is before any goroutine
	// uses gRPC, i.e. during initialisation (upstream's integration
	// framework does the same).
	quietGRPC()
}

// QuietLogs turns down the logging that Kubernetes' server code and its
// test helpers switch on: it sets klog's process-wide verbosity to 0
// (importing the apiserver test helpers sets it to 5, about 10k lines per
// control plane start) and keeps only errors from gRPC's global logger (the
// etcd client logs every connection at info), which this package already
// does when it is initialised.
//
// Start does the same, with the verbosity from its Options; call QuietLogs
// in a TestMain or main whose Kubernetes code logs before Start. Safe for
// concurrent use.
func QuietLogs() {
	quietGRPC()
	setVerbosity(0)
}

func quietGRPC() {
	grpcLogOnce.Do(func() {
		grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
	})
}

// setVerbosity sets klog's global -v. klog.InitFlags binds a new flag set to
// klog's single global state, so this is the same as passing -v=N, without
// touching flag.CommandLine.
func setVerbosity(v int) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", strconv.Itoa(v))
}
