package main

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/clusterctx"
	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/host/trust"
)

const pushUsage = `Usage:
  wasmsched push P.wasm --name N [--namespace NS] [--settings JSON|@FILE] [--context KIND]... [--label KEY=VALUE]... [--keep K] [--wait DURATION] [--force] [--kubeconfig PATH]
  wasmsched push --configmaps P.wasm [--name N] [--namespace NS] [--settings JSON|@FILE] [--kubeconfig PATH]
  wasmsched push --oci REF P.wasm [--settings JSON|@FILE] [--settings-schema FILE] [--registry-ca FILE]

Every form takes --key K.key: the module is signed as wasmsched sign signs
it, the signature stored with it (the .sig tag of the artifact, or the
annotation wasmsched.io/signature of chunk 0).

Checks the module first, with its settings (--settings, else the
SchedulingPolicy's) and the SchedulingPolicy's limits, through the code the
scheduler loads it with (compile, _initialize, ABI, the policy's settings
validation), and the kinds of cluster object the module reads against
those the SchedulingPolicy allows (--context, else its spec.context); a
module or settings that would not load, or a module reading a kind that is
not allowed, are refused and nothing is written.

A scheduler profile runs the SchedulingPolicies its configuration selects,
by name or by label (the demo's and manifests/config.yaml's:
wasmsched.io/profile=wasmsched).
Profiles publish their selection in the wasmsched-status ConfigMap; push
warns when none selects the policy, and with --wait refuses it, nothing
written, rather than wait for a revision no scheduler will load.

Then writes the module as immutable content-addressed chunk ConfigMaps
(wasm-<40 digits of its sha256>-<i>), creates the SchedulingPolicy N or
points its spec.module at the new digest (and sets spec.settings when
--settings is given), and deletes the chunks of modules no SchedulingPolicy
in the namespace refers to (in spec.module, status.serving, status.lastGood
or the first K entries of status.history) and older than 10 minutes.

A revision the scheduler quarantined (it was new when a scheduler died) is
refused unless --force, which clears the quarantine so that the scheduler
tries it again.

With --configmaps, writes the chunks N-0, N-1, ... of a policy a static
scheduler configuration names with source: {configMap: N}, updating them in
place, as before SchedulingPolicies.

With --oci, publishes the module to an OCI registry as a policy artifact
(REF: oci://REGISTRY/REPO:TAG, the scheme optional; docs/policy-oci.md) and
prints the spec.module that names it pinned: the module's sha256 and the
manifest's digest. Nothing is written to the cluster. Credentials come from
the Docker config (~/.docker/config.json).

`

// gcGrace is how old an unreferenced module's chunks must be before push
// deletes them: a concurrent push writes its chunks before the
// SchedulingPolicy that refers to them, and must not lose them in between.
var gcGrace = 10 * time.Minute

func runPush(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, pushUsage)
		fs.PrintDefaults()
	}
	name := fs.String("name", "", "SchedulingPolicy (or with --configmaps, policy) name (default: the file name without .wasm)")
	namespace := fs.String("namespace", defaultNamespace, "the scheduler's namespace")
	settingsFlag := fs.String("settings", "", "the policy's settings: JSON, or @FILE (default: the SchedulingPolicy's)")
	keep := fs.Int("keep", 3, "keep the chunks of the first K revisions of every SchedulingPolicy's history")
	wait := fs.Duration("wait", 0, "wait this long for the scheduler to serve the new revision (0: do not wait)")
	force := fs.Bool("force", false, "push a quarantined revision, clearing its quarantine")
	var labelFlags labelList
	fs.Var(&labelFlags, "label", "KEY=VALUE: label the SchedulingPolicy (repeatable), e.g. wasmsched.io/profile=wasmsched, the label the demo's and manifests/config.yaml's profiles select")
	var contextFlags kindList
	fs.Var(&contextFlags, "context", "KIND: a kind of cluster object the policy may read, as group/version/resource (repeatable; replaces spec.context), e.g. v1/namespaces")
	configMaps := fs.Bool("configmaps", false, "write fixed-name chunks N-i for source: {configMap: N} instead of a SchedulingPolicy")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long (not counting --wait)")
	ociRef := fs.String("oci", "", "publish to this OCI reference (REGISTRY/REPO:TAG) instead of the cluster")
	registryCA := fs.String("registry-ca", "", "with --oci: PEM file of CA certificates trusted besides the system roots")
	keyFile := fs.String("key", "", "sign the module with this private key (wasmsched sign's formats): the .sig tag with --oci, else the chunks' annotation "+source.AnnotationSignature)
	schemaFile := fs.String("settings-schema", "", "with --oci: a JSON Schema of the policy's settings, carried as the annotation "+source.OCIAnnotationSchema)
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return errors.New("no module given")
	case len(pos) > 1:
		return fmt.Errorf("unexpected argument %q (one module at a time)", pos[1])
	case *keep < 0:
		return fmt.Errorf("--keep %d: want 0 or more", *keep)
	}
	path := pos[0]
	if *name == "" {
		*name = strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)), ".tinygo")
	}
	settings, err := readSettings(*settingsFlag)
	if err != nil {
		return err
	}
	module, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var signer crypto.Signer
	var sig string
	if *keyFile != "" {
		if signer, err = readPrivateKey(*keyFile); err != nil {
			return err
		}
		raw, err := trust.Sign(signer, module)
		if err != nil {
			return err
		}
		sig = base64.StdEncoding.EncodeToString(raw)
	}
	if *schemaFile != "" && *ociRef == "" {
		return errors.New("--settings-schema applies to --oci")
	}
	if *ociRef != "" {
		if *configMaps || *force || *wait != 0 || len(labelFlags) > 0 {
			return errors.New("--oci publishes to a registry: --configmaps, --force, --wait and --label do not apply")
		}
		opts, err := ociOptions(*registryCA, *timeout)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		var schema []byte
		if *schemaFile != "" {
			if schema, err = os.ReadFile(*schemaFile); err != nil {
				return err
			}
		}
		return pushOCI(ctx, *ociRef, path, module, api.Revision{Settings: settings}, schema, signer, opts, stdout)
	}
	c, err := connect(*kubeconfig, *namespace)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if *configMaps {
		if *force || *wait != 0 {
			return errors.New("--force and --wait apply to SchedulingPolicies, not to --configmaps")
		}
		if len(labelFlags) > 0 || contextFlags.set {
			return errors.New("--label and --context apply to SchedulingPolicies, not to --configmaps (a static configuration's context is the plugin's policies[].context)")
		}
		return pushLegacy(ctx, c, *name, path, module, settings, sig, stdout)
	}
	p := &pusher{cluster: c, name: *name, path: path, module: module, settings: settings, signature: sig, keep: *keep, force: *force, out: stdout,
		labels: labelFlags, context: contextFlags, waiting: *wait > 0}
	key, gen, err := p.push(ctx)
	if err != nil {
		return err
	}
	if p.unselected != "" {
		fmt.Fprintf(stderr, "warning: %s\n", p.unselected)
	}
	if *wait > 0 {
		return c.waitServing(context.Background(), *name, key, gen, *wait, stdout)
	}
	return nil
}

// pushLegacy is push --configmaps: the fixed-name chunks of a static
// configuration, after the same check of the module.
func pushLegacy(ctx context.Context, c *cluster, name, path string, module []byte, settings json.RawMessage, sig string, out io.Writer) error {
	if _, err := checkModule(ctx, name, module, api.Revision{Settings: settings}); err != nil {
		return fmt.Errorf("%s does not load, nothing written: %w", path, err)
	}
	cms, err := source.Pack(name, c.namespace, module)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if sig != "" {
		cms[0].Annotations[source.AnnotationSignature] = sig
	}
	if err := pushConfigMaps(ctx, c.client, cms, out); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "policy %s: sha256 %s, %d bytes in %d ConfigMap(s) in namespace %s\n",
		name, source.Digest(module), len(module), len(cms), c.namespace)
	return err
}

// pusher pushes one module to one SchedulingPolicy.
type pusher struct {
	*cluster
	name, path string
	module     []byte
	settings   json.RawMessage // nil: keep the policy's
	// signature is the module's base64 signature for chunk 0 ("": none).
	signature string
	keep      int
	force     bool
	out       io.Writer
	// labels are added to the SchedulingPolicy's (--label).
	labels labelList
	// context replaces spec.context when set (--context).
	context kindList
	// waiting: push --wait; a policy no profile selects is then refused.
	waiting bool
	// unselected says why no scheduler profile selects the policy pushed
	// ("" when one does, or when no profile publishes its selection).
	unselected string
}

// kindList is the repeatable --context KIND flag.
type kindList struct {
	kinds []string
	set   bool
}

func (l *kindList) String() string { return strings.Join(l.kinds, ",") }

func (l *kindList) Set(v string) error {
	l.set = true
	if v == "" {
		return nil // --context '': allow none
	}
	k, err := clusterctx.ParseKind(v)
	if err != nil {
		return err
	}
	if err := clusterctx.Forbidden(k); err != nil {
		return err
	}
	if !slices.Contains(l.kinds, k.String()) {
		l.kinds = append(l.kinds, k.String())
	}
	return nil
}

// labelList is the repeatable --label KEY=VALUE flag.
type labelList map[string]string

func (l *labelList) String() string { return fmt.Sprint(map[string]string(*l)) }

func (l *labelList) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	if errs := validation.IsQualifiedName(k); len(errs) > 0 {
		return fmt.Errorf("label key %q: %s", k, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(val); len(errs) > 0 {
		return fmt.Errorf("label value %q: %s", val, strings.Join(errs, "; "))
	}
	if *l == nil {
		*l = labelList{}
	}
	(*l)[k] = val
	return nil
}

// label adds the --label labels to sp; it reports whether any changed.
func (l labelList) label(sp *api.SchedulingPolicy) bool {
	changed := false
	for k, v := range l {
		if sp.Labels[k] != v {
			if sp.Labels == nil {
				sp.Labels = map[string]string{}
			}
			sp.Labels[k], changed = v, true
		}
	}
	return changed
}

// push checks the module, writes its chunks and the SchedulingPolicy, and
// collects unreferenced chunks. It returns the new revision's key and the
// generation of the policy that names it.
func (p *pusher) push(ctx context.Context) (string, int64, error) {
	digest := source.Digest(p.module)
	cms, err := source.PackModule(p.namespace, p.module)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", p.path, err)
	}
	if p.signature != "" {
		cms[0].Annotations[source.AnnotationSignature] = p.signature
	}

	// What the policy will be: the existing spec with the new module (and
	// settings), or a new one.
	_, cur, err := p.getPolicy(ctx, p.name)
	if err != nil && (!apierrors.IsNotFound(err) || isNoCRD(err)) {
		return "", 0, fmt.Errorf("read schedulingpolicy %s/%s: %w", p.namespace, p.name, err)
	}
	spec := api.SchedulingPolicySpec{}
	if cur != nil {
		spec = *cur.Spec.DeepCopy()
	}
	p.apply(&spec, digest)
	rev := api.RevisionOf(&spec)

	kinds, err := checkModule(ctx, p.name, p.module, rev)
	if err != nil {
		return "", 0, fmt.Errorf("%s does not load with %s, nothing written: %w", p.path, p.describeRevision(cur != nil), err)
	}
	if err := p.checkContext(kinds, spec.Context, cur != nil); err != nil {
		return "", 0, err
	}
	labels := map[string]string{}
	if cur != nil {
		maps.Copy(labels, cur.Labels)
	}
	maps.Copy(labels, p.labels)
	sels, err := p.readSelections(ctx)
	if err != nil {
		return "", 0, err
	}
	p.unselected = sels.notSelected(p.name, labels)
	if p.unselected != "" && p.waiting {
		return "", 0, fmt.Errorf("%s, nothing written (--wait would wait for a revision no scheduler loads)", p.unselected)
	}
	if cur != nil && !p.force {
		if q := quarantined(cur, rev.Key); q != nil {
			return "", 0, fmt.Errorf("revision %s of policy %s is quarantined, nothing written: %s (replica %s, %s); push --force clears the quarantine and the scheduler tries it again",
				rev.Short(), p.name, q.Reason, q.Replica, q.At.UTC().Format(time.RFC3339))
		}
	}

	if err := p.writeChunks(ctx, cms, true); err != nil {
		return "", 0, err
	}
	if p.force {
		if err := p.clearQuarantine(ctx, rev.Key); err != nil {
			return "", 0, err
		}
	}
	obj, verb, err := p.writePolicy(ctx, digest)
	if err != nil {
		return "", 0, err
	}
	fmt.Fprintf(p.out, "schedulingpolicy/%s %s\n", p.name, verb)
	// A concurrent push's collection may have deleted chunks this push
	// found in place before the policy referred to them: put them back.
	if err := p.writeChunks(ctx, cms, false); err != nil {
		return "", 0, err
	}
	sp, err := api.FromUnstructured(obj)
	if err != nil {
		return "", 0, err
	}
	if err := collect(ctx, p.cluster, p.keep, gcGrace, time.Now(), p.out); err != nil {
		return "", 0, err
	}
	_, err = fmt.Fprintf(p.out, "policy %s: sha256 %s, %d bytes in %d ConfigMap(s) in namespace %s\n",
		p.name, digest, len(p.module), len(cms), p.namespace)
	return api.RevisionOf(&sp.Spec).Key, obj.GetGeneration(), err
}

// apply points spec at the pushed module (in chunks: no url or file) and
// sets the settings and context given.
func (p *pusher) apply(spec *api.SchedulingPolicySpec, digest string) {
	spec.Module = api.Module{SHA256: digest}
	if p.settings != nil {
		spec.Settings = p.settings
	}
	if p.context.set {
		spec.Context = slices.Clone(p.context.kinds)
	}
}

// describeRevision says where the settings and limits checked come from:
// the flags, the existing SchedulingPolicy, or the defaults.
func (p *pusher) describeRevision(exists bool) string {
	switch {
	case p.settings == nil && exists:
		return "the settings and limits of schedulingpolicy " + p.name
	case exists:
		return "the settings of --settings and the limits of schedulingpolicy " + p.name
	case p.settings != nil:
		return "the settings of --settings and the default limits"
	}
	return "no settings and the default limits"
}

// checkContext refuses a module that reads kinds of cluster object the
// policy will not allow: the scheduler would refuse it at load.
func (p *pusher) checkContext(kinds, allowed []string, exists bool) error {
	var missing []string
	for _, k := range kinds {
		if kind, err := clusterctx.ParseKind(k); err == nil {
			if err := clusterctx.Forbidden(kind); err != nil {
				return fmt.Errorf("%s reads %w, nothing written", p.path, err)
			}
		}
		if !slices.Contains(allowed, k) {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	from := "--context"
	if !p.context.set {
		from = "its spec.context"
		if !exists {
			from = "a new policy's spec.context, empty without --context,"
		}
	}
	flags := make([]string, 0, len(kinds))
	for _, k := range kinds {
		flags = append(flags, "--context "+k)
	}
	return fmt.Errorf("%s reads %s, which schedulingpolicy %s would not allow (%s allows %s): push it with %s, nothing written",
		p.path, strings.Join(missing, ", "), p.name, from, orNone(allowed), strings.Join(flags, " "))
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// writeChunks creates the module's chunks. A chunk that exists already is
// the same chunk when it carries the same module digest (names are
// content-addressed, the ConfigMaps immutable). report prints a line per
// chunk; otherwise only chunks created are printed.
func (p *pusher) writeChunks(ctx context.Context, cms []*v1.ConfigMap, report bool) error {
	cmAPI := p.client.CoreV1().ConfigMaps(p.namespace)
	for _, cm := range cms {
		var verb string
		var err error
		// A chunk found in place may be deleted before it is read (a
		// racing push's collection): then create it again.
		for range 5 {
			verb = "created"
			_, err = cmAPI.Create(ctx, cm, metav1.CreateOptions{FieldManager: fieldManager})
			if !apierrors.IsAlreadyExists(err) {
				break
			}
			var have *v1.ConfigMap
			have, err = cmAPI.Get(ctx, cm.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
			case have.Annotations[source.AnnotationSHA256] != cm.Annotations[source.AnnotationSHA256]:
				err = fmt.Errorf("exists and holds a chunk of module %q, not of %s; delete it if it is not in use",
					have.Annotations[source.AnnotationSHA256], cm.Annotations[source.AnnotationSHA256])
			default:
				verb = "unchanged"
				// The chunks exist (immutable data); a new signature is
				// added beside those there (a rotation signs twice).
				if s := cm.Annotations[source.AnnotationSignature]; s != "" && !hasSignature(have.Annotations[source.AnnotationSignature], s) {
					have.Annotations[source.AnnotationSignature] = strings.TrimPrefix(have.Annotations[source.AnnotationSignature]+","+s, ",")
					_, err = cmAPI.Update(ctx, have, metav1.UpdateOptions{FieldManager: fieldManager})
					verb = "signed"
				}
			}
			break
		}
		if err != nil {
			return fmt.Errorf("configmap %s/%s: %w", p.namespace, cm.Name, err)
		}
		if report || verb == "created" {
			fmt.Fprintf(p.out, "configmap/%s %s\n", cm.Name, verb)
		}
	}
	return nil
}

// writePolicy creates the SchedulingPolicy, or points it at the module.
func (p *pusher) writePolicy(ctx context.Context, digest string) (*unstructured.Unstructured, string, error) {
	for {
		obj, changed, err := p.updateSpec(ctx, p.name, func(sp *api.SchedulingPolicy) (bool, error) {
			before := api.RevisionOf(&sp.Spec).Key
			p.apply(&sp.Spec, digest)
			labelled := p.labels.label(sp)
			return api.RevisionOf(&sp.Spec).Key != before || sp.Spec.Module.URL != "" || sp.Spec.Module.File != "" || labelled, nil
		})
		switch {
		case err == nil && changed:
			return obj, "configured", nil
		case err == nil:
			return obj, "unchanged", nil
		case !apierrors.IsNotFound(err) || isNoCRD(err):
			return nil, "", err
		}
		spec := api.SchedulingPolicySpec{}
		p.apply(&spec, digest)
		created := &api.SchedulingPolicy{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.namespace}, Spec: spec}
		p.labels.label(created)
		u, err := api.ToUnstructured(created)
		if err != nil {
			return nil, "", err
		}
		// The defaults (mode, failure policy, weight) are the CRD's.
		unstructured.RemoveNestedField(u.Object, "status")
		obj, err = p.policies().Create(ctx, u, metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) {
			continue // created meanwhile: update it
		}
		if err != nil {
			return nil, "", fmt.Errorf("create schedulingpolicy %s/%s: %w", p.namespace, p.name, crdHint(err))
		}
		return obj, "created", nil
	}
}

// quarantined returns sp's quarantine entry for key.
func quarantined(sp *api.SchedulingPolicy, key string) *api.Quarantine {
	for i := range sp.Status.Quarantined {
		if sp.Status.Quarantined[i].Key == key {
			return &sp.Status.Quarantined[i]
		}
	}
	return nil
}

// clearQuarantine removes key from status.quarantined, leaving the rest of
// the status as the scheduler wrote it.
func (p *pusher) clearQuarantine(ctx context.Context, key string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := p.policies().Get(ctx, p.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		list, _, _ := unstructured.NestedSlice(u.Object, "status", "quarantined")
		kept := slices.DeleteFunc(slices.Clone(list), func(e any) bool {
			m, ok := e.(map[string]any)
			return ok && m["key"] == key
		})
		if len(kept) == len(list) {
			return nil
		}
		if err := unstructured.SetNestedSlice(u.Object, kept, "status", "quarantined"); err != nil {
			return err
		}
		if _, err := p.policies().UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
			return err
		}
		fmt.Fprintf(p.out, "schedulingpolicy/%s quarantine of revision %s cleared\n", p.name, key)
		return nil
	})
	if err != nil {
		return fmt.Errorf("clear the quarantine of schedulingpolicy %s/%s: %w", p.namespace, p.name, err)
	}
	return nil
}

// hasSignature reports whether the comma-separated list holds sig.
func hasSignature(list, sig string) bool {
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == sig {
			return true
		}
	}
	return false
}
