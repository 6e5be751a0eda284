package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// decodeStream reads the ConfigMaps of a multi-document YAML stream.
func decodeStream(t *testing.T, s string) []*v1.ConfigMap {
	t.Helper()
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(s), 4096)
	var out []*v1.ConfigMap
	for {
		cm := &v1.ConfigMap{}
		err := dec.Decode(cm)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if cm.Kind != "ConfigMap" || cm.APIVersion != "v1" {
			t.Fatalf("document of kind %s/%s", cm.APIVersion, cm.Kind)
		}
		out = append(out, cm)
	}
}

func TestPackYAML(t *testing.T) {
	wasm := testwasm.Path(t, "examples/nodepin")
	module, _ := os.ReadFile(wasm)
	// Flags after the module, as in the usage line.
	code, out, errs := runCLI("pack", wasm, "--name", "gpu", "--namespace", "sched")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.HasPrefix(out, "# wasmsched policy gpu: sha256 "+source.Digest(module)) {
		t.Errorf("output starts %q", out[:min(len(out), 200)])
	}
	cms := decodeStream(t, out)
	if len(cms) < 2 {
		t.Fatalf("%d ConfigMaps, want several", len(cms))
	}
	for i, cm := range cms {
		if cm.Namespace != "sched" || cm.Name != source.ChunkName("gpu", i) {
			t.Errorf("ConfigMap %d is %s/%s", i, cm.Namespace, cm.Name)
		}
	}
	got, digest, err := source.Assemble("gpu", cms)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, module) || digest != source.Digest(module) {
		t.Fatal("pack output does not assemble to the module")
	}
}

func TestPackJSON(t *testing.T) {
	module := testwasm.Bytes(t, "examples/nodepin")
	wasm := filepath.Join(t.TempDir(), "nodepin.wasm")
	os.WriteFile(wasm, module, 0o644)
	// --name defaults to the file name; flags before the module work too.
	code, out, errs := runCLI("pack", "-o", "json", wasm)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var list struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Items      []*v1.ConfigMap `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if list.APIVersion != "v1" || list.Kind != "List" {
		t.Fatalf("a %s/%s, want a v1 List", list.APIVersion, list.Kind)
	}
	got, _, err := source.Assemble("nodepin", list.Items)
	if err != nil || !bytes.Equal(got, module) || list.Items[0].Namespace != "wasmsched-system" {
		t.Fatalf("pack -o json does not assemble to the module: %v", err)
	}
}

func TestPackBadInput(t *testing.T) {
	dir := t.TempDir()
	wasm := filepath.Join(dir, "p.wasm")
	os.WriteFile(wasm, []byte("\x00asm\x01\x00\x00\x00"), 0o644)
	empty := filepath.Join(dir, "empty.wasm")
	os.WriteFile(empty, nil, 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pack"}, "wasmsched pack: no module given\n"},
		{[]string{"pack", wasm, wasm}, "wasmsched pack: unexpected argument \"" + wasm + "\" (one module at a time)\n"},
		{[]string{"pack", filepath.Join(dir, "none.wasm")}, "wasmsched pack: open " + filepath.Join(dir, "none.wasm") + ": no such file or directory\n"},
		{[]string{"pack", empty}, "wasmsched pack: " + empty + ": module is empty\n"},
		{[]string{"pack", wasm, "-o", "xml"}, "wasmsched pack: unknown output format \"xml\" (want yaml or json)\n"},
		{[]string{"pack", wasm, "--name", "GPU"}, "wasmsched pack: " + wasm + `: policy name "GPU": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')` + "\n"},
		{[]string{"push", wasm, "--kubeconfig", filepath.Join(dir, "none")}, "wasmsched push: kubeconfig: stat " + filepath.Join(dir, "none") + ": no such file or directory\n"},
	} {
		code, _, errs := runCLI(tc.args...)
		if code != 1 || errs != tc.want {
			t.Errorf("%v: exit %d, stderr\n%q\nwant\n%q", tc.args, code, errs, tc.want)
		}
	}
	if code, _, _ := runCLI("pack", "--bogus"); code != 2 {
		t.Errorf("unknown flag: exit %d, want 2", code)
	}
	if code, _, errs := runCLI("pack", "-h"); code != 0 || !strings.Contains(errs, "kubectl apply --server-side -f -") {
		t.Errorf("pack -h: exit %d, %s", code, errs)
	}
}
