package plugin

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/dump"

	"github.com/wasmsched/wasmsched/host/lifecycle"
	"github.com/wasmsched/wasmsched/host/source"
)

func decode(t *testing.T, js string) (*lifecycle.Args, error) {
	t.Helper()
	return DecodeArgs(&runtime.Unknown{Raw: []byte(js), ContentType: runtime.ContentTypeJSON})
}

// An allow-list of kinds is accepted as written: core, built-in groups and
// custom resources.
func TestArgsContext(t *testing.T) {
	a, err := decode(t, `{"policies": [{"name": "quota", "source": {"file": "/p/q.wasm"}, "context": ["v1/namespaces", "scheduling.x-k8s.io/v1alpha1/elasticquotas", "resource.k8s.io/v1/resourceslices"]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Policies[0].Context; len(got) != 3 || got[1] != "scheduling.x-k8s.io/v1alpha1/elasticquotas" {
		t.Fatalf("context %q", got)
	}
}

func TestArgsDefaults(t *testing.T) {
	a, err := decode(t, `{"policies": [{"name": "gpu", "source": {"file": "/p/gpu.wasm"}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	p := a.Policies[0]
	if p.Weight != 1 || p.FailurePolicy != lifecycle.FailurePolicyFail || p.Timeout.Duration != 200*time.Millisecond || p.MemoryLimit.String() != "256Mi" {
		t.Fatalf("defaults: %+v (timeout %v, memory %v)", p, p.Timeout.Duration, p.MemoryLimit)
	}
	cfg := p.EngineConfig()
	if cfg.Name != "gpu" || cfg.CallTimeout != 200*time.Millisecond || cfg.MemoryLimit != 256<<20 {
		t.Fatalf("engine config %+v", cfg)
	}
}

func TestArgsValidationNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		args, want string
	}{
		{`{}`, "policies: Required value"},
		{`{"policies": [{"source": {"file": "x"}}]}`, "policies[0].name: Required value"},
		{`{"policies": [{"name": "a", "source": {"file": "x"}}, {"name": "a", "source": {"file": "y"}}]}`, `policies[1].name: Duplicate value: "a"`},
		{`{"policies": [{"name": "a"}]}`, "policies[0].source: Required value: one of file, configMap, url or oci is needed"},
		{`{"policies": [{"name": "a", "source": {"file": "x", "configMap": "a"}}]}`, "only one of file, configMap, url and oci may be set"},
		{`{"policies": [{"name": "a", "source": {"oci": "oci://r.example/p:v1", "sha256": "` + strings.Repeat("0", 64) + `"}}]}`, `policies[0].source.oci: Invalid value: "oci://r.example/p:v1": policy "a": oci reference "oci://r.example/p:v1": not pinned`},
		{`{"policies": [{"name": "a", "source": {"oci": "oci://r.example/p@sha256:` + strings.Repeat("0", 64) + `"}}]}`, `policies[0].source.sha256: Invalid value: "": policy "a": the module's sha256 (64 hex digits) is needed with oci`},
		{`{"policies": [{"name": "a", "source": {"url": "http://x/a.wasm", "sha256": "` + strings.Repeat("0", 64) + `"}}]}`, "policies[0].source.url: Invalid value"},
		{`{"policies": [{"name": "a", "source": {"url": "https://x/a.wasm"}}]}`, "policies[0].source.sha256: Required value"},
		{`{"policies": [{"name": "a", "source": {"file": "x", "sha256": "` + strings.Repeat("0", 64) + `"}}]}`, "policies[0].source.sha256: Invalid value"},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "mode": "Shadow"}]}`, "policies[0].shadows: Required value"},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "mode": "Shadow", "shadows": "b"}]}`, `policies[0].shadows: Invalid value: "b": must name an enforcing policy`},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "onDelete": "Explode"}]}`, `policies[0].onDelete: Unsupported value: "Explode"`},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "weight": 500}]}`, "policies[0].weight: Invalid value: 500: must be in 1..100"},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "failurePolicy": "Maybe"}]}`, `policies[0].failurePolicy: Unsupported value: "Maybe"`},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "timeout": "2h"}]}`, "policies[0].timeout: Invalid value"},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "memoryLimit": "1Mi"}]}`, `policies[0].memoryLimit: Invalid value: "1Mi": must be between 8Mi and 4Gi`},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "maxInstances": -1}]}`, "policies[0].maxInstances: Invalid value: -1"},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "timeout": "soon"}]}`, "decode WasmPolicy args"},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "context": ["namespaces"]}]}`, `policies[0].context[0]: Invalid value: "namespaces": kind "namespaces": want group/version/resource`},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "context": ["v1/Namespace"]}]}`, `policies[0].context[0]: Invalid value: "v1/Namespace"`},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "context": ["v1/namespaces", "v1/secrets"]}]}`, "policies[0].context[1]: Forbidden: v1/secrets: secrets are never readable by policies"},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "context": ["v1/namespaces", "v1/namespaces"]}]}`, `policies[0].context[1]: Duplicate value: "v1/namespaces"`},
	} {
		_, err := decode(t, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("args %s: err = %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}

// A URL source's address and digest are judged by host/source's rules, so
// that arguments accepted here are fetched by the source and arguments the
// source would refuse are refused here, at start-up, naming the policy and
// the field.
func TestArgsURLSourceAgreesWithTheSource(t *testing.T) {
	d := source.Digest([]byte("module"))
	for _, tc := range []struct {
		url, sha256 string
		want        []string // in the argument error; none: valid
	}{
		{"https://example.com/gpu.wasm", d, nil},
		{"https://example.com/gpu.wasm", strings.ToUpper(d), nil},
		{"http://localhost/gpu.wasm", d, nil},
		{"http://localhost:8080/gpu.wasm", d, nil},
		{"http://127.0.0.1:8080/gpu.wasm", d, nil},
		{"http://[::1]/gpu.wasm", d, nil},
		{"http://example.com/gpu.wasm", d, []string{`policies[0].source.url: Invalid value: "http://example.com/gpu.wasm": policy "gpu": http is only allowed for localhost; use https`}},
		{"ftp://example.com/gpu.wasm", d, []string{`policies[0].source.url: Invalid value: "ftp://example.com/gpu.wasm": policy "gpu": want an https:// URL`}},
		{"https://user:secret@example.com/gpu.wasm", "", []string{`policies[0].source.sha256: Required value: policy "gpu": missing`}},
		{"https://example.com/gpu.wasm", d[:63], []string{`policies[0].source.sha256: Invalid value: "` + d[:63] + `": policy "gpu": want the module's sha256 as 64 hex digits, got 63 characters`}},
		{"https://example.com/gpu.wasm", d + "0", []string{`policy "gpu": want the module's sha256 as 64 hex digits, got 65 characters`}},
		{"https://example.com/gpu.wasm", d[:63] + "z", []string{`policies[0].source.sha256: Invalid value: "` + d[:63] + `z": policy "gpu": want the module's sha256 as 64 hex digits, got 'z' at offset 63`}},
		{"https://example.com/gpu.wasm", "sha256:" + d, []string{`policy "gpu": want the module's sha256 as 64 hex digits, without the "sha256:" prefix`}},
		// Both wrong: both reported, the password never shown.
		{"http://user:secret@example.com/gpu.wasm", "abc", []string{
			`policies[0].source.url: Invalid value: "http://user:xxxxx@example.com/gpu.wasm": policy "gpu": http is only allowed`,
			`policies[0].source.sha256: Invalid value: "abc": policy "gpu": want the module's sha256 as 64 hex digits, got 3 characters`}},
	} {
		js, _ := json.Marshal(map[string]any{"policies": []any{map[string]any{"name": "gpu", "source": map[string]any{"url": tc.url, "sha256": tc.sha256}}}})
		_, err := decode(t, string(js))
		srcErr := source.ValidateURL(tc.url, tc.sha256)
		if (err == nil) != (srcErr == nil) {
			t.Errorf("url %q, sha256 %q: arguments say %v, the source says %v", tc.url, tc.sha256, err, srcErr)
		}
		if len(tc.want) == 0 && err != nil {
			t.Errorf("url %q, sha256 %q: %v, want valid", tc.url, tc.sha256, err)
		}
		for _, want := range tc.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("url %q, sha256 %q: err = %v, want it to contain %q", tc.url, tc.sha256, err, want)
			}
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("the error shows the URL's password: %v", err)
		}
	}
}

func TestArgsSettingsVerbatim(t *testing.T) {
	a, err := decode(t, `{"policies": [{"name": "a", "source": {"file": "x"}, "settings": {"nodes": ["n1"], "deep": {"x": 1}}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(a.Policies[0].Settings); got != `{"nodes": ["n1"], "deep": {"x": 1}}` {
		t.Fatalf("settings = %s", got)
	}
	c := a.DeepCopy()
	c.Policies[0].Settings[2] = 'X'
	if a.Policies[0].Settings[2] == 'X' {
		t.Fatal("DeepCopy shares settings")
	}
}

// Arguments handed over already decoded (a *lifecycle.Args, as a scheduler built
// with the plugin's types passes them) keep every field, the namespace
// included.
func TestArgsDecodedObjectKeepsEveryField(t *testing.T) {
	in := &lifecycle.Args{Namespace: "team-a", Policies: []lifecycle.PolicyArgs{{Name: "a", Source: lifecycle.Source{ConfigMap: "a"}}}}
	a, err := DecodeArgs(in)
	if err != nil {
		t.Fatal(err)
	}
	if a.Namespace != "team-a" {
		t.Fatalf("namespace %q, want team-a", a.Namespace)
	}
	if a == in || &a.Policies[0] == &in.Policies[0] {
		t.Fatal("DecodeArgs defaulted the caller's arguments in place")
	}
}

// DeepCopy loses no field and shares no memory with its original, for
// every field the argument types have now or gain later: fill sets each
// one, through pointers and slices, or fails on a kind it cannot fill.
func TestArgsDeepCopyEveryField(t *testing.T) {
	orig, want := &lifecycle.Args{}, &lifecycle.Args{}
	fill(t, reflect.ValueOf(orig).Elem(), 1)
	fill(t, reflect.ValueOf(want).Elem(), 1)
	c := orig.DeepCopy()
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("DeepCopy lost fields:\n got %s\nwant %s", dump.Pretty(c), dump.Pretty(want))
	}
	if obj, ok := orig.DeepCopyObject().(*lifecycle.Args); !ok || !reflect.DeepEqual(obj, want) {
		t.Fatalf("DeepCopyObject = %s, want %s", dump.Pretty(obj), dump.Pretty(want))
	}
	// Writing every field of the copy in place (through its pointers and
	// into its slices' arrays) must leave the original as it was.
	fill(t, reflect.ValueOf(c).Elem(), 2)
	if !reflect.DeepEqual(orig, want) {
		t.Fatalf("changing the copy changed the original:\n got %s\nwant %s", dump.Pretty(orig), dump.Pretty(want))
	}
	if reflect.DeepEqual(c, want) {
		t.Fatal("fill did not change the copy")
	}
}

// fill sets every field reachable from v to a non-zero value derived from
// seed, writing into existing pointees and slice elements rather than
// replacing them. It fails the test on a kind it does not know, so a new
// kind of field cannot go unchecked.
func fill(t *testing.T, v reflect.Value, seed int) {
	t.Helper()
	if q, ok := v.Addr().Interface().(*resource.Quantity); ok {
		*q = resource.MustParse(fmt.Sprintf("%dMi", 8+seed))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				t.Fatalf("%s.%s is unexported: teach fill to set it", v.Type(), f.Name)
			}
			fill(t, v.Field(i), seed+i)
		}
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(t, v.Elem(), seed)
	case reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		}
		for i := range v.Len() {
			fill(t, v.Index(i), seed+i)
		}
	case reflect.Map:
		// Written in place (keys of both seeds), so that a copy sharing
		// the map would show the second fill in the original.
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, seed)
		fill(t, e, seed)
		v.SetMapIndex(k, e)
	case reflect.String:
		v.SetString(fmt.Sprintf("%s-%d", v.Type().Name(), seed))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(seed + 1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(seed + 1))
	case reflect.Bool:
		v.SetBool(!v.Bool()) // true on a first fill, changed on a second
	default:
		t.Fatalf("fill: %s (%s) is not handled", v.Type(), v.Kind())
	}
}
