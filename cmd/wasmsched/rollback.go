package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/source"
)

const rollbackUsage = `Usage: wasmsched rollback NAME [DIGEST] [--namespace NS] [--kubeconfig PATH] [--wait DURATION]

Points the SchedulingPolicy NAME back at an earlier revision: its module,
settings, timeout, memoryLimit and maxInstances.

Without DIGEST: status.lastGood when the spec names another revision, else
the newest entry of status.history that differs from the spec's revision.
With DIGEST (a module's sha256, or a unique prefix of at least 8 digits):
the newest history entry with that module, or, when no entry has it but its
chunk ConfigMaps exist, that module with the current settings and limits.

The module's chunks must exist; otherwise nothing is written.

`

// minPrefix is the shortest digest prefix rollback accepts: 8 hex digits
// make an accidental match among a namespace's modules unlikely.
const minPrefix = 8

func runRollback(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rollback", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, rollbackUsage)
		fs.PrintDefaults()
	}
	namespace := fs.String("namespace", defaultNamespace, "the scheduler's namespace")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	wait := fs.Duration("wait", 0, "wait this long for the scheduler to serve the revision (0: do not wait)")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long (not counting --wait)")
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(pos) == 0 || len(pos) > 2 {
		fs.Usage()
		return errUsage
	}
	name, prefix := pos[0], ""
	if len(pos) == 2 {
		prefix = strings.ToLower(pos[1])
		if len(prefix) < minPrefix || len(prefix) > 64 || !isHexString(prefix) {
			return fmt.Errorf("digest %q: want a sha256 or a prefix of at least %d hex digits", pos[1], minPrefix)
		}
	}
	c, err := connect(*kubeconfig, *namespace)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	_, sp, err := c.getPolicy(ctx, name)
	if err != nil {
		return fmt.Errorf("read schedulingpolicy %s/%s: %w", c.namespace, name, err)
	}
	target, what, err := rollbackTarget(ctx, c, sp, prefix)
	if err != nil {
		return err
	}
	if target.Module.URL == "" && target.Module.File == "" && target.Module.OCI == "" {
		v, err := source.FetchModule(ctx, c.client, c.namespace, target.Module.SHA256)
		if err != nil {
			return fmt.Errorf("cannot roll back to module %s, nothing written: %w", target.Module.SHA256, err)
		}
		if strings.HasPrefix(what, "module ") {
			// Never proven with these settings: check it loads with them.
			if _, err := checkModule(ctx, name, v.Module, target); err != nil {
				return fmt.Errorf("module %s does not load with the settings and limits of schedulingpolicy %s, nothing written: %w", target.Module.SHA256, name, err)
			}
		}
	}
	obj, changed, err := c.updateSpec(ctx, name, func(sp *api.SchedulingPolicy) (bool, error) {
		before := api.RevisionOf(&sp.Spec).Key
		sp.Spec.Module = target.Module
		sp.Spec.Settings = target.Settings
		sp.Spec.Timeout = target.Timeout
		sp.Spec.MemoryLimit = target.MemoryLimit
		sp.Spec.MaxInstances = target.MaxInstances
		sp.Spec.Context = target.Context
		return api.RevisionOf(&sp.Spec).Key != before, nil
	})
	if err != nil {
		return err
	}
	verb := "rolled back to"
	if !changed {
		verb = "already at"
	}
	fmt.Fprintf(stdout, "schedulingpolicy/%s %s %s\n", name, verb, what)
	if q := quarantined(sp, target.Key); q != nil {
		fmt.Fprintf(stdout, "warning: revision %s is quarantined (%s); the scheduler will not load it until wasmsched push --force clears it\n", target.Key, q.Reason)
	}
	if *wait > 0 {
		updated, err := api.FromUnstructured(obj)
		if err != nil {
			return err
		}
		return c.waitServing(context.Background(), name, api.RevisionOf(&updated.Spec).Key, obj.GetGeneration(), *wait, stdout)
	}
	return nil
}

// rollbackTarget chooses the revision to return to, and says what it is.
// Its Key is the key of the revision as the spec will name it.
func rollbackTarget(ctx context.Context, c *cluster, sp *api.SchedulingPolicy, prefix string) (api.Revision, string, error) {
	current := api.SpecRevision(sp).Key
	st := &sp.Status
	entry := func(r api.Revision, label string) (api.Revision, string, error) {
		// A revision resolved from a tag is rolled back to by its digest.
		m := r.Module
		m.ResolvedFrom = ""
		spec := api.SchedulingPolicySpec{Module: m, Settings: r.Settings, Timeout: r.Timeout, MemoryLimit: r.MemoryLimit, MaxInstances: r.MaxInstances, Context: r.Context}
		rev := api.RevisionOf(&spec)
		return rev, fmt.Sprintf("%s (%s)", rev.Short(), label), nil
	}
	proven := func(h api.HistoryEntry) string { return "proven " + h.ProvenAt.UTC().Format(time.RFC3339) }
	if prefix == "" {
		if st.LastGood != nil && st.LastGood.Key != current {
			return entry(*st.LastGood, "last good")
		}
		for _, h := range st.History {
			if h.Key != current {
				return entry(h.Revision, proven(h))
			}
		}
		return api.Revision{}, "", fmt.Errorf("policy %s has no earlier revision to roll back to (status.lastGood and status.history hold none other than the spec's)", sp.Name)
	}
	// History first: a revision with its settings and limits.
	var digests []string
	for _, h := range st.History {
		if strings.HasPrefix(h.Module.SHA256, prefix) && !slices.Contains(digests, h.Module.SHA256) {
			digests = append(digests, h.Module.SHA256)
		}
	}
	if len(digests) > 1 {
		return api.Revision{}, "", fmt.Errorf("digest prefix %s matches %d modules in the history of policy %s (%s): give more digits", prefix, len(digests), sp.Name, strings.Join(digests, ", "))
	}
	if len(digests) == 1 {
		for _, h := range st.History {
			if h.Module.SHA256 == digests[0] {
				return entry(h.Revision, proven(h))
			}
		}
	}
	// The module alone, from its chunks.
	digest, err := moduleByPrefix(ctx, c, prefix)
	if err != nil {
		return api.Revision{}, "", err
	}
	spec := *sp.Spec.DeepCopy()
	spec.Module = api.Module{SHA256: digest}
	rev := api.RevisionOf(&spec)
	return rev, "module " + api.ShortDigest(digest) + " (not in the history; settings and limits kept)", nil
}

// moduleByPrefix finds the one module with chunks in the namespace whose
// digest starts with prefix.
func moduleByPrefix(ctx context.Context, c *cluster, prefix string) (string, error) {
	if len(prefix) == 64 {
		return prefix, nil // FetchModule reports a missing module
	}
	list, err := c.client.CoreV1().ConfigMaps(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: source.LabelModule})
	if err != nil {
		return "", fmt.Errorf("list module chunks in %s: %w", c.namespace, err)
	}
	var found []string
	for _, cm := range list.Items {
		d := cm.Annotations[source.AnnotationSHA256]
		if strings.HasPrefix(d, prefix) && !slices.Contains(found, d) {
			found = append(found, d)
		}
	}
	sort.Strings(found)
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no module with digest %s... in the history or in chunk ConfigMaps of namespace %s, nothing written", prefix, c.namespace)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("digest prefix %s matches %d modules in namespace %s (%s): give more digits", prefix, len(found), c.namespace, strings.Join(found, ", "))
}

func isHexString(s string) bool {
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}
