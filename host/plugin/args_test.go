package plugin

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

func decode(t *testing.T, js string) (*Args, error) {
	t.Helper()
	return DecodeArgs(&runtime.Unknown{Raw: []byte(js), ContentType: runtime.ContentTypeJSON})
}

func TestArgsDefaults(t *testing.T) {
	a, err := decode(t, `{"policies": [{"name": "gpu", "source": {"file": "/p/gpu.wasm"}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	p := a.Policies[0]
	if p.Weight != 1 || p.FailurePolicy != FailurePolicyFail || p.Timeout.Duration != 200*time.Millisecond || p.MemoryLimit.String() != "256Mi" {
		t.Fatalf("defaults: %+v (timeout %v, memory %v)", p, p.Timeout.Duration, p.MemoryLimit)
	}
	cfg := p.engineConfig()
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
		{`{"policies": [{"name": "a"}]}`, "policies[0].source: Required value: one of file, configMap or url is needed"},
		{`{"policies": [{"name": "a", "source": {"file": "x", "configMap": "a"}}]}`, "only one of file, configMap and url may be set"},
		{`{"policies": [{"name": "a", "source": {"url": "http://x/a.wasm", "sha256": "` + strings.Repeat("0", 64) + `"}}]}`, "policies[0].source.url: Invalid value"},
		{`{"policies": [{"name": "a", "source": {"url": "https://x/a.wasm"}}]}`, "policies[0].source.sha256: Required value"},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "mode": "Shadow"}]}`, "policies[0].shadows: Required value"},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "mode": "Shadow", "shadows": "b"}]}`, `policies[0].shadows: Invalid value: "b": must name an enforcing policy`},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "onDelete": "Explode"}]}`, `policies[0].onDelete: Unsupported value: "Explode"`},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "weight": 500}]}`, "policies[0].weight: Invalid value: 500: must be in 1..100"},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "failurePolicy": "Maybe"}]}`, `policies[0].failurePolicy: Unsupported value: "Maybe"`},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "timeout": "2h"}]}`, "policies[0].timeout: Invalid value"},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "memoryLimit": "1Mi"}]}`, `policies[0].memoryLimit: Invalid value: "1Mi": must be between 8Mi and 4Gi`},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "maxInstances": -1}]}`, "policies[0].maxInstances: Invalid value: -1"},
		{`{"policies": [{"name": "a", "source": {"file": "x"}, "timeout": "soon"}]}`, "decode WasmPolicy args"},
	} {
		_, err := decode(t, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("args %s: err = %v, want it to contain %q", tc.args, err, tc.want)
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
