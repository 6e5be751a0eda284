package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/lifecycle"
)

// runStatus prints the SchedulingPolicies of the namespace and what the
// schedulers report of them. Without any (no CRD, or policies configured
// statically), it prints what every scheduler replica reports in its status
// ConfigMap: the active digest, when it was loaded, the version loading
// now, and the last rejected upload.
func runStatus(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG or ~/.kube/config)")
	namespace := fs.String("namespace", "wasmsched-system", "the scheduler's namespace")
	output := fs.String("o", "table", "output format: table or json")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if *output != "table" && *output != "json" {
		return fmt.Errorf("unknown output format %q (want table or json)", *output)
	}
	c, err := connect(*kubeconfig, *namespace)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := c.policies().List(ctx, metav1.ListOptions{})
	if err != nil && !isNoCRD(crdHint(err)) {
		return fmt.Errorf("list schedulingpolicies in %s: %w", *namespace, err)
	}
	if err == nil && len(list.Items) > 0 {
		sps := make([]*api.SchedulingPolicy, len(list.Items))
		for i := range list.Items {
			if sps[i], err = api.FromUnstructured(&list.Items[i]); err != nil {
				return err
			}
		}
		sort.Slice(sps, func(i, j int) bool { return sps[i].Name < sps[j].Name })
		sels, err := c.readSelections(ctx)
		if err != nil {
			return err
		}
		if *output == "json" {
			return printPoliciesJSON(stdout, sps, sels)
		}
		return printPolicies(stdout, sps, sels, time.Now())
	}
	// No SchedulingPolicy: the schedulers' status ConfigMap (policies from
	// static configuration).
	client := c.client
	cm, err := client.CoreV1().ConfigMaps(*namespace).Get(ctx, lifecycle.StatusConfigMap, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("no SchedulingPolicy in %s, and read %s/%s: %w", *namespace, *namespace, lifecycle.StatusConfigMap, err)
	}
	var reports []lifecycle.Status
	var sels selections
	keys := make([]string, 0, len(cm.Data))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var st lifecycle.ProfileReport
		if err := json.Unmarshal([]byte(cm.Data[k]), &st); err != nil {
			return fmt.Errorf("%s/%s key %s: %w", *namespace, lifecycle.StatusConfigMap, k, err)
		}
		if st.Selection != nil {
			sels = append(sels, st)
			continue
		}
		reports = append(reports, st.Status)
	}
	if *output == "json" {
		return writeJSON(stdout, reports)
	}
	if len(reports) == 0 && len(sels) > 0 {
		// Profiles that select SchedulingPolicies, and none to select.
		for _, r := range sels {
			fmt.Fprintf(stdout, "no SchedulingPolicy in %s; profile %s (replica %s) selects %s\n", *namespace, r.Profile, r.Replica, describeSelection(r.Selection))
		}
		return nil
	}
	return printStatus(stdout, reports, time.Now())
}

// printStatus prints reports as a table. A version loading shows as
// "compiling 3f2a1c9e0b7d for 12s", the time measured from when the
// scheduler received it to now.
func printStatus(w io.Writer, reports []lifecycle.Status, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REPLICA\tPROFILE\tPOLICY\tMODE\tACTIVE DIGEST\tLOADED\tRELOADS\tLOADING\tLAST REJECTED")
	for _, r := range reports {
		for _, p := range r.Policies {
			digest := "(none)"
			if p.Active && p.Digest != "" {
				digest = short(p.Digest)
			}
			loaded := "-"
			if !p.LoadedAt.IsZero() {
				loaded = p.LoadedAt.UTC().Format(time.RFC3339)
			}
			loading := "-"
			if l := p.Loading; l != nil {
				loading = fmt.Sprintf("%s %s for %v", l.Stage, short(l.Digest), max(0, now.Sub(l.Since)).Round(time.Second))
			}
			rejected := "-"
			if lr := p.LastRejected; lr != nil {
				rejected = lr.At.UTC().Format(time.RFC3339) + " " + strings.ReplaceAll(lr.Error, "\n", " ")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Replica, r.Profile, p.Policy, p.Mode, digest, loaded, p.Reloads, loading, rejected)
		}
	}
	return tw.Flush()
}

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}
