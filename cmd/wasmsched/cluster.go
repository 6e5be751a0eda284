package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/explain"
	"github.com/wasmsched/wasmsched/host/policy"
)

// cluster is what the commands that talk to a cluster use: the typed client
// for ConfigMaps, Nodes and Pods and the dynamic client for
// SchedulingPolicies, in one namespace.
type cluster struct {
	client    kubernetes.Interface
	dyn       dynamic.Interface
	namespace string
}

// connect reads the kubeconfig (the explicit path, else $KUBECONFIG or
// ~/.kube/config).
func connect(kubeconfig, namespace string) (*cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &cluster{client: client, dyn: dyn, namespace: namespace}, nil
}

func (c *cluster) policies() dynamic.ResourceInterface {
	return c.dyn.Resource(api.GVR).Namespace(c.namespace)
}

// getPolicy reads a SchedulingPolicy; the unstructured object keeps every
// field for an update, the typed one is for reading.
func (c *cluster) getPolicy(ctx context.Context, name string) (*unstructured.Unstructured, *api.SchedulingPolicy, error) {
	u, err := c.policies().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, crdHint(err)
	}
	sp, err := api.FromUnstructured(u)
	if err != nil {
		return nil, nil, err
	}
	return u, sp, nil
}

// crdHint explains a "the server could not find the requested resource"
// that means the CRD is not installed: the error is then a *noCRDError
// (still "not found" to apierrors.IsNotFound).
func crdHint(err error) error {
	if apierrors.IsNotFound(err) {
		if se, ok := err.(apierrors.APIStatus); ok && se.Status().Details != nil && se.Status().Details.Name != "" {
			return err // the object is absent, not the resource
		}
		return &noCRDError{err}
	}
	return err
}

// noCRDError is a request for SchedulingPolicies the API server does not
// serve.
type noCRDError struct{ err error }

func (e *noCRDError) Error() string {
	return fmt.Sprintf("%v (is the SchedulingPolicy CRD %s installed? wasmsched-up and manifests/crd.yaml install it)", e.err, api.CRDName)
}
func (e *noCRDError) Unwrap() error { return e.err }

func isNoCRD(err error) bool {
	var e *noCRDError
	return errors.As(err, &e)
}

// updateSpec applies change to the policy's spec and writes it, reading
// the object again after a conflict (a concurrent push or rollback: the
// last writer wins, and each write is a whole spec derived from what it
// read). change returns false when there is nothing to write.
func (c *cluster) updateSpec(ctx context.Context, name string, change func(*api.SchedulingPolicy) (bool, error)) (*unstructured.Unstructured, bool, error) {
	var out *unstructured.Unstructured
	var changed bool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, sp, err := c.getPolicy(ctx, name)
		if err != nil {
			return err
		}
		changed, err = change(sp)
		if err != nil || !changed {
			out = u
			return err
		}
		if err := setSpec(u, &sp.Spec); err != nil {
			return err
		}
		u.SetLabels(sp.Labels)
		out, err = c.policies().Update(ctx, u, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("update schedulingpolicy %s/%s: %w", c.namespace, name, err)
	}
	return out, changed, nil
}

// fieldManager names the CLI in managed fields.
const fieldManager = "wasmsched"

// setSpec replaces u's spec with spec, leaving metadata and status as read.
func setSpec(u *unstructured.Unstructured, spec *api.SchedulingPolicySpec) error {
	tmp, err := api.ToUnstructured(&api.SchedulingPolicy{Spec: *spec})
	if err != nil {
		return err
	}
	u.Object["spec"] = tmp.Object["spec"]
	return nil
}

// readSettings reads --settings: inline JSON, or @file. It returns nil for
// an empty value.
func readSettings(v string) (json.RawMessage, error) {
	if v == "" {
		return nil, nil
	}
	b := []byte(v)
	where := "--settings"
	if path, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		if b, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("--settings: %w", err)
		}
		where = path
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, fmt.Errorf("%s: settings are not valid JSON: %v", where, err)
	}
	return out.Bytes(), nil
}

// checkModule loads the module with its settings and limits through the
// scheduler's own code (host/policy: compile, _initialize, the ABI check,
// the policy's settings validation) and releases it. It returns the kinds
// of cluster object the module declares it reads ("v1/namespaces"). An
// error says what is wrong, in the policy's words when its settings hook
// refused.
func checkModule(ctx context.Context, name string, wasm []byte, rev api.Revision) ([]string, error) {
	p, err := policy.Load(ctx, policy.Options{Name: name, Wasm: wasm, Settings: rev.Settings, Engine: explain.EngineConfig(rev), MaxInstances: 1})
	if err != nil {
		return nil, err
	}
	var kinds []string
	for _, k := range p.ContextKinds() {
		kinds = append(kinds, k.String())
	}
	return kinds, p.Close(ctx)
}

// parseInterleaved parses flags given before, between or after positional
// arguments and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, flag.ErrHelp
			}
			return nil, errUsage
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// waitServing waits until the policy serves revision key (Ready True), the
// scheduler refuses it, or d passes. gen is the policy's generation that
// names key: a Rejected condition or a quarantine older than it is about an
// earlier revision and does not count.
func (c *cluster) waitServing(ctx context.Context, name, key string, gen int64, d time.Duration, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var last *api.SchedulingPolicy
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		_, sp, err := c.getPolicy(ctx, name)
		if err == nil {
			last = sp
			done, err := servingVerdict(sp, key, gen)
			if done {
				if err != nil {
					return err
				}
				_, err := fmt.Fprintf(out, "serving %s\n", api.ShortDigest(sp.Status.Serving.Module.SHA256))
				return err
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
			return fmt.Errorf("revision %s of policy %s does not serve after %v (%s)", key, name, d, msg)
		case <-tick.C:
		}
	}
}

// servingVerdict says whether the wait for key is over: serving (nil
// error) or refused (the reason).
func servingVerdict(sp *api.SchedulingPolicy, key string, gen int64) (bool, error) {
	st := &sp.Status
	ready := findCondition(st.Conditions, api.ConditionReady)
	if st.Serving != nil && st.Serving.Key == key && ready != nil && ready.Status == metav1.ConditionTrue {
		return true, nil
	}
	current := func(condGen int64) bool {
		// Without any generation written, a condition cannot be dated:
		// take it as current.
		return max(condGen, st.ObservedGeneration) >= gen || (condGen == 0 && st.ObservedGeneration == 0)
	}
	if rej := findCondition(st.Conditions, api.ConditionRejected); rej != nil && rej.Status == metav1.ConditionTrue && current(rej.ObservedGeneration) {
		return true, fmt.Errorf("policy %s refused revision %s: %s: %s", sp.Name, key, rej.Reason, rej.Message)
	}
	if ready != nil && ready.Reason == api.ReasonQuarantined && current(ready.ObservedGeneration) {
		for _, q := range st.Quarantined {
			if q.Key == key {
				return true, fmt.Errorf("policy %s: revision %s is quarantined: %s", sp.Name, key, q.Reason)
			}
		}
	}
	return false, nil
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}
