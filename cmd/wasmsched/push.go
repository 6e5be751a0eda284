package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wasmsched/wasmsched/host/source"
)

func runPush(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: wasmsched push P.wasm [--name N] [--namespace NS] [--kubeconfig PATH]\n\n"+
			"Creates or updates the ConfigMaps that deliver the module, then deletes\n"+
			"the policy's chunks beyond the new last one.\n\n")
		fs.PrintDefaults()
	}
	mf := addModuleFlags(fs)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	_, module, cms, err := parseModuleArgs(fs, args, mf)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := push(ctx, client, cms, stdout); err != nil {
		return err
	}
	name, ns := cms[0].Labels[source.LabelPolicy], cms[0].Namespace
	_, err = fmt.Fprintf(stdout, "policy %s: sha256 %s, %d bytes in %d ConfigMap(s) in namespace %s\n",
		name, source.Digest(module), len(module), len(cms), ns)
	return err
}

// push writes the chunks in order, then deletes the policy's chunks beyond
// the last one, printing a line per ConfigMap.
func push(ctx context.Context, client kubernetes.Interface, cms []*v1.ConfigMap, out io.Writer) error {
	name, ns := cms[0].Labels[source.LabelPolicy], cms[0].Namespace
	api := client.CoreV1().ConfigMaps(ns)
	for _, cm := range cms {
		cur, err := api.Get(ctx, cm.Name, metav1.GetOptions{})
		var verb string
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, cm, metav1.CreateOptions{FieldManager: "wasmsched"})
			verb = "created"
		case err != nil:
		case cur.Labels[source.LabelPolicy] != name:
			return fmt.Errorf("configmap %s/%s exists and is not a chunk of policy %s (no label %s=%s); not overwriting it",
				ns, cm.Name, name, source.LabelPolicy, name)
		default:
			up := cur.DeepCopy()
			if up.Labels == nil {
				up.Labels = map[string]string{}
			}
			if up.Annotations == nil {
				up.Annotations = map[string]string{}
			}
			maps.Copy(up.Labels, cm.Labels)
			maps.Copy(up.Annotations, cm.Annotations)
			up.Data = nil
			up.BinaryData = cm.BinaryData
			verb = "unchanged"
			if !reflect.DeepEqual(up.Labels, cur.Labels) || !reflect.DeepEqual(up.Annotations, cur.Annotations) ||
				len(cur.Data) > 0 || !reflect.DeepEqual(up.BinaryData, cur.BinaryData) {
				_, err = api.Update(ctx, up, metav1.UpdateOptions{FieldManager: "wasmsched"})
				verb = "configured"
			}
		}
		if err != nil {
			return fmt.Errorf("configmap %s/%s: %w", ns, cm.Name, err)
		}
		fmt.Fprintf(out, "configmap/%s %s\n", cm.Name, verb)
	}
	// Leftover chunks of a bigger earlier version, after the new ones are
	// written.
	list, err := api.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{source.LabelPolicy: name}).String()})
	if err != nil {
		return fmt.Errorf("list configmaps of policy %s in %s: %w", name, ns, err)
	}
	for _, cm := range list.Items {
		i, ok := chunkIndex(name, cm.Name)
		if !ok || i < len(cms) {
			continue
		}
		uid := cm.UID
		err := api.Delete(ctx, cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete leftover configmap %s/%s: %w", ns, cm.Name, err)
		}
		fmt.Fprintf(out, "configmap/%s deleted\n", cm.Name)
	}
	return nil
}

// chunkIndex parses i from a chunk name <policy>-<i>.
func chunkIndex(policy, name string) (int, bool) {
	s, ok := strings.CutPrefix(name, policy+"-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	return i, err == nil && i >= 0 && strconv.Itoa(i) == s
}
