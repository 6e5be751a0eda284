package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	corev1defaults "k8s.io/kubernetes/pkg/apis/core/v1"
	"sigs.k8s.io/yaml"
)

// ReadNodes reads Nodes from a file of YAML or JSON documents, or a List.
func ReadNodes(path string) ([]*v1.Node, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseNodes(path, data)
}

// ParseNodes reads Nodes from YAML or JSON documents, or a List, as
// ReadNodes does from a file; path names them in errors.
func ParseNodes(path string, data []byte) ([]*v1.Node, error) {
	docs, err := parseObjects(path, data, "Node")
	if err != nil {
		return nil, err
	}
	out := make([]*v1.Node, 0, len(docs))
	for _, d := range docs {
		n := &v1.Node{}
		if err := json.Unmarshal(d.raw, n); err != nil {
			return nil, fmt.Errorf("%s: %s: %v", path, d.where, err)
		}
		if n.Name == "" {
			return nil, fmt.Errorf("%s: %s: node has no metadata.name", path, d.where)
		}
		if err := validateMeta(path, d.where, "Node", &n.ObjectMeta, false); err != nil {
			return nil, err
		}
		corev1defaults.SetObjectDefaults_Node(n)
		out = append(out, n)
	}
	return out, nil
}

// ReadPods reads Pods the same way, applying the API server's defaults
// (a container's requests default to its limits), as the scheduler would
// see them.
func ReadPods(path string) ([]*v1.Pod, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePods(path, data)
}

// ParsePods reads Pods from YAML or JSON documents, or a List, as ReadPods
// does from a file; path names them in errors.
func ParsePods(path string, data []byte) ([]*v1.Pod, error) {
	docs, err := parseObjects(path, data, "Pod")
	if err != nil {
		return nil, err
	}
	out := make([]*v1.Pod, 0, len(docs))
	for _, d := range docs {
		p := &v1.Pod{}
		if err := json.Unmarshal(d.raw, p); err != nil {
			return nil, fmt.Errorf("%s: %s: %v", path, d.where, err)
		}
		if p.Name == "" {
			return nil, fmt.Errorf("%s: %s: pod has no metadata.name", path, d.where)
		}
		if p.Namespace == "" {
			p.Namespace = "default"
		}
		if p.UID == "" {
			p.UID = types.UID("uid-" + p.Namespace + "-" + p.Name)
		}
		if err := validateMeta(path, d.where, "Pod", &p.ObjectMeta, true); err != nil {
			return nil, err
		}
		corev1defaults.SetObjectDefaults_Pod(p)
		out = append(out, p)
	}
	return out, nil
}

// ReadPod reads exactly one Pod.
func ReadPod(path string) (*v1.Pod, error) {
	pods, err := ReadPods(path)
	if err != nil {
		return nil, err
	}
	if len(pods) != 1 {
		return nil, fmt.Errorf("%s: holds %d pods, want exactly 1", path, len(pods))
	}
	return pods[0], nil
}

type object struct {
	where string
	raw   []byte
}

// parseObjects splits YAML or JSON documents into JSON objects of the
// wanted kind (any kind when kind is ""), unpacking List documents.
func parseObjects(path string, data []byte, kind string) ([]object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []object
	for doc := 1; ; doc++ {
		chunk, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %v", path, doc, err)
		}
		if len(bytes.TrimSpace(chunk)) == 0 || isOnlyComments(chunk) {
			continue
		}
		js, err := yaml.YAMLToJSON(chunk)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: not valid YAML: %v", path, doc, err)
		}
		var head struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(js, &head); err != nil {
			return nil, fmt.Errorf("%s: document %d: not a Kubernetes object: %v", path, doc, err)
		}
		where := fmt.Sprintf("document %d", doc)
		if strings.HasSuffix(head.Kind, "List") {
			for i, item := range head.Items {
				o, err := checkKind(path, fmt.Sprintf("%s item %d", where, i+1), item, kind)
				if err != nil {
					return nil, err
				}
				out = append(out, o)
			}
			continue
		}
		o, err := checkKind(path, where, js, kind)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	if len(out) == 0 {
		if kind == "" {
			kind = "object"
		}
		return nil, fmt.Errorf("%s: no %s found", path, kind)
	}
	return out, nil
}

func checkKind(path, where string, raw []byte, kind string) (object, error) {
	var head struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return object{}, fmt.Errorf("%s: %s: not a Kubernetes object: %v", path, where, err)
	}
	if head.Kind == "" || kind != "" && head.Kind != kind {
		got := head.Kind
		if got == "" {
			got = "an object without kind"
		}
		if kind == "" {
			kind = "an object with apiVersion and kind"
		}
		return object{}, fmt.Errorf("%s: %s is %s, want %s", path, where, got, kind)
	}
	return object{where: where, raw: raw}, nil
}

// validateMeta checks an object's metadata as the API server does when the
// object is created (apimachinery's ValidateObjectMeta: name, namespace,
// labels, annotations, owner references, finalizers), so that an offline
// run never passes on an object that could not exist in a cluster (a label
// value with a colon, a name with capitals). A Namespace's name is a DNS
// label, every other name a DNS subdomain (the rule of most kinds; a kind
// with a laxer rule of its own is checked by the stricter one).
func validateMeta(path, where, kind string, meta *metav1.ObjectMeta, namespaced bool) error {
	nameFn := apivalidation.NameIsDNSSubdomain
	if kind == "Namespace" {
		nameFn = apivalidation.ValidateNamespaceName
	}
	errs := apivalidation.ValidateObjectMeta(meta, namespaced, nameFn, field.NewPath("metadata"))
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%s: %s: %s %q would be refused by the API server: %s", path, where, kind, meta.Name, strings.Join(msgs, "; "))
}

func isOnlyComments(b []byte) bool {
	for _, line := range strings.Split(string(b), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") && t != "---" {
			return false
		}
	}
	return true
}
