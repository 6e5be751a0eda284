// Command wasmsched is the policy author's and operator's tool: it
// evaluates policies offline (eval), runs scenario files against built
// modules (test), and packs, uploads and inspects policies in a cluster
// (push, diff, rollback, resolve, status: SchedulingPolicies; pack, push
// --configmaps: ConfigMaps for a static configuration).
//
// It must not link the control plane (internal/controlplane: etcd and
// kube-apiserver), which would make it about 165 MB and minutes to build:
// the embedded cluster is cmd/wasmsched-up, and TestNoControlPlane keeps it
// out of this command's dependencies.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

const usage = `wasmsched: run and manage WebAssembly scheduling policies

Usage:
  Writing and checking a policy:
    wasmsched new NAME [--module PATH] [--dir DIR] [--sdk CHECKOUT]
    wasmsched eval --policy P.wasm [--config settings.json] [--weight N] ... --pod pod.yaml --nodes nodes.yaml [--pods pods.yaml] [--objects objects.yaml]
                   [--timeout 200ms] [--init-timeout 10s] [--memory-limit 256Mi] [-o table|json]
    wasmsched test [-run REGEXP] [-v] [--policy NAME=P.wasm]... [DIR|FILE.yaml]...

  Shipping it to a cluster:
    wasmsched push P.wasm --name N [--namespace NS] [--settings JSON|@FILE] [--label KEY=VALUE]... [--keep K] [--wait 1m] [--force] [--kubeconfig PATH]
    wasmsched diff NAME NEW.wasm [--settings JSON|@FILE] [--scheduler-name S] [--namespace NS] [-o table|json]
    wasmsched rollback NAME [DIGEST] [--namespace NS] [--wait 1m] [--kubeconfig PATH]
    wasmsched status [--kubeconfig PATH] [--namespace NS] [-o table|json]

  Seeing why a pod is where it is, or Pending:
    wasmsched explain [-n NS] POD [--node NODE] [--revision NAME=DIGEST]... [--policy NAME=FILE.wasm]... [-o table|json|yaml]
    wasmsched ui [--listen 127.0.0.1:8087] [--kubeconfig PATH]

  Through an OCI registry (docs/policy-oci.md):
    wasmsched push --oci REGISTRY/REPO:TAG P.wasm [--settings JSON|@FILE] [--registry-ca FILE]
    wasmsched pull REGISTRY/REPO[:TAG|@sha256:...] -o P.wasm [--registry-ca FILE]
    wasmsched resolve NAME [--namespace NS] [--wait 1m] [--kubeconfig PATH]   (a SchedulingPolicy naming a tag with allowTag: resolve it again)

  Signatures (cosign's formats; docs/policy-oci.md):
    wasmsched sign --generate-key --key K.key [--algorithm ecdsa-p256|ed25519]
    wasmsched sign --key K.key P.wasm | --oci REGISTRY/REPO@sha256:... [--registry-ca FILE]
    wasmsched verify --key K.pub [--key K2.pub]... P.wasm | REGISTRY/REPO@sha256:... [--registry-ca FILE]

  Without SchedulingPolicies (a static source: {configMap: N}):
    wasmsched pack P.wasm [--name N] [--namespace NS] [-o yaml|json]
    wasmsched push --configmaps P.wasm [--name N] [--namespace NS] [--settings JSON|@FILE] [--kubeconfig PATH]

  wasmsched version

Run "wasmsched <command> -h" for a command's flags. The embedded cluster
(etcd, kube-apiserver and the scheduler in one process) is a command of its
own, wasmsched-up (make run).
`

// errUpMoved answers the command that moved out of this binary.
var errUpMoved = errors.New("the embedded cluster is a command of its own: bin/wasmsched-up [--demo] (make run builds and starts it; go build ./cmd/wasmsched-up)")

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes a command line and returns the exit code. Errors are printed
// as one line on stderr.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "new":
		err = runNew(args[1:], stdout, stderr)
	case "eval":
		err = runEval(args[1:], stdout, stderr)
	case "test":
		err = runTest(args[1:], stdout, stderr)
	case "up":
		err = errUpMoved
	case "pack":
		err = runPack(args[1:], stdout, stderr)
	case "push":
		err = runPush(args[1:], stdout, stderr)
	case "pull":
		err = runPull(args[1:], stdout, stderr)
	case "sign":
		err = runSign(args[1:], stdout, stderr)
	case "verify":
		err = runVerify(args[1:], stdout, stderr)
	case "status":
		err = runStatus(args[1:], stdout, stderr)
	case "rollback":
		err = runRollback(args[1:], stdout, stderr)
	case "resolve":
		err = runResolve(args[1:], stdout, stderr)
	case "diff":
		err = runDiff(args[1:], stdout, stderr)
	case "explain":
		err = runExplain(args[1:], stdout, stderr)
	case "ui":
		err = runUI(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, versionString())
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "wasmsched: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		if err == errUsage {
			return 2
		}
		if err == errTestsFailed {
			return 1 // the output has said why
		}
		fmt.Fprintf(stderr, "wasmsched %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// writeJSON writes v to w as indented JSON and a newline: the -o json
// output of every command.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
