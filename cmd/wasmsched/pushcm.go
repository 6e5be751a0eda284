package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"reflect"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmsched/wasmsched/host/source"
)

// pushConfigMaps writes the fixed-name chunks of push --configmaps in
// order, then deletes the policy's chunks beyond the last one, printing a
// line per ConfigMap.
func pushConfigMaps(ctx context.Context, client kubernetes.Interface, cms []*v1.ConfigMap, out io.Writer) error {
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
