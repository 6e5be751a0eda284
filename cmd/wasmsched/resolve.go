package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
)

const resolveUsage = `Usage: wasmsched resolve NAME [--namespace NS] [--kubeconfig PATH] [--wait DURATION]

Has the scheduler resolve again the OCI tag the SchedulingPolicy NAME names
(spec.module.oci with allowTag): sets spec.module.resolveToken to the
current time, a new revision. The scheduler reads what the tag names now,
records it in status.resolved and loads that digest (checked against the
trust policy) like any new revision; until then, and if it is refused, the
digest resolved before keeps serving. A tag is never followed otherwise
(docs/policy-oci.md#tags).

`

func runResolve(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("resolve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, resolveUsage)
		fs.PrintDefaults()
	}
	namespace := fs.String("namespace", defaultNamespace, "the scheduler's namespace")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	wait := fs.Duration("wait", 0, "wait this long for the scheduler to resolve the tag and serve its digest (0: do not wait)")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long (not counting --wait)")
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return errUsage
	}
	name := pos[0]
	c, err := connect(*kubeconfig, *namespace)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	token := time.Now().UTC().Format("20060102T150405.000000000Z")
	var tag string
	obj, _, err := c.updateSpec(ctx, name, func(sp *api.SchedulingPolicy) (bool, error) {
		m := &sp.Spec.Module
		switch {
		case !m.IsTag():
			what := "chunk ConfigMaps"
			switch {
			case m.OCI != "":
				what = "oci " + m.OCI + ", a digest"
			case m.URL != "":
				what = "url " + m.URL
			case m.File != "":
				what = "file " + m.File
			}
			return false, fmt.Errorf("schedulingpolicy %s/%s names no OCI tag (its module: %s): nothing to resolve, nothing written", c.namespace, name, what)
		case !m.AllowTag:
			return false, fmt.Errorf("schedulingpolicy %s/%s names the tag %s without allowTag: nothing written", c.namespace, name, m.OCI)
		}
		tag = m.OCI
		m.ResolveToken = token
		return true, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "schedulingpolicy/%s: resolveToken %s; the scheduler resolves %s again\n", name, token, tag)
	if *wait <= 0 {
		return nil
	}
	return c.waitResolved(context.Background(), name, obj.GetGeneration(), *wait, stdout)
}

// waitResolved waits until the spec's tag is resolved (status.resolved
// matches the spec) and its revision serves, or is refused.
func (c *cluster) waitResolved(ctx context.Context, name string, gen int64, d time.Duration, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last *api.SchedulingPolicy
	for {
		if _, sp, err := c.getPolicy(ctx, name); err == nil {
			last = sp
			if res := sp.Status.Resolved; res.Matches(&sp.Spec.Module) {
				key := api.SpecRevision(sp).Key
				if done, err := servingVerdict(sp, key, gen); done {
					if err != nil {
						return err
					}
					_, err := fmt.Fprintf(out, "resolved %s to %s (module %s)\nserving %s\n", sp.Spec.Module.OCI, res.Digest, api.ShortDigest(res.SHA256), api.ShortDigest(sp.Status.Serving.Module.SHA256))
					return err
				}
			} else if rej := findCondition(sp.Status.Conditions, api.ConditionRejected); rej != nil && rej.Status == metav1.ConditionTrue && rej.ObservedGeneration >= gen {
				return fmt.Errorf("policy %s: the tag %s was not resolved: %s: %s", name, sp.Spec.Module.OCI, rej.Reason, rej.Message)
			}
		}
		select {
		case <-ctx.Done():
			msg := "no status yet"
			if last != nil {
				if r := findCondition(last.Status.Conditions, api.ConditionReady); r != nil {
					msg = fmt.Sprintf("Ready %s, %s: %s", r.Status, r.Reason, r.Message)
				}
			}
			return fmt.Errorf("the tag of policy %s is not resolved and serving after %v (%s)", name, d, msg)
		case <-tick.C:
		}
	}
}
