package guest_test

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"regexp"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
)

// The policy below is gpuguard, the policy that guest/README.md builds.
// Its declarations are copied verbatim from the README's main.go (the
// tests at the end of this file check that), so that the guide's code is
// compiled and run by `go test ./guest/`.

// settings are the operator's settings.
type settings struct {
	// Resource is the extended resource that marks a GPU node.
	Resource string `json:"resource"`
}

// defaultSettings are the settings of an operator who gives none.
func defaultSettings() settings { return settings{Resource: "nvidia.com/gpu"} }

// guard is the policy, built once from valid settings.
type guard struct {
	resource string
	// rejected is the one rejection the policy makes, built once.
	rejected guest.Status
}

// newGuard validates the settings and builds the policy.
func newGuard(s settings) (*guard, error) {
	if s.Resource == "" {
		return nil, errors.New(`settings: "resource" must not be empty`)
	}
	return &guard{
		resource: s.Resource,
		rejected: guest.RejectUnresolvable("gpuguard: node has %s and the pod requests none", s.Resource),
	}, nil
}

// filter rejects a node that has the resource for a pod that requests none
// of it.
func (g *guard) filter(c *guest.Cycle, n *guest.NodeInfo) guest.Status {
	if n.Allocatable(g.resource) > 0 && c.Pod.Request(g.resource) == 0 {
		return g.rejected
	}
	return guest.OK()
}

// Example tests gpuguard's Filter natively: a Cycle and NodeInfos are
// built from abiv1 messages, as the host would send them, and the policy's
// functions are called directly, without WebAssembly.
func Example() {
	g, err := guest.Load(nil, defaultSettings(), newGuard) // no settings: the defaults
	if err != nil {
		panic(err)
	}

	cpuNode := guest.NewNodeInfo(&abiv1.NodeInfo{Node: &abiv1.Node{
		Name:        "cpu-1",
		Allocatable: &abiv1.Resources{MilliCpu: 8000, Memory: 32 << 30, Pods: 110},
	}})
	gpuNode := guest.NewNodeInfo(&abiv1.NodeInfo{Node: &abiv1.Node{
		Name: "gpu-1",
		Allocatable: &abiv1.Resources{MilliCpu: 8000, Memory: 32 << 30, Pods: 110,
			Scalars: []*abiv1.Scalar{{Name: "nvidia.com/gpu", Value: 4}}},
	}})
	nodes := []*guest.NodeInfo{cpuNode, gpuNode}
	web := guest.NewCycle(guest.NewPod(&abiv1.Pod{
		Name: "web", Namespace: "shop",
		Requests: &abiv1.Resources{MilliCpu: 500, Memory: 256 << 20},
	}), nodes)
	train := guest.NewCycle(guest.NewPod(&abiv1.Pod{
		Name: "train", Namespace: "ml",
		Requests: &abiv1.Resources{MilliCpu: 4000, Scalars: []*abiv1.Scalar{{Name: "nvidia.com/gpu", Value: 1}}},
	}), nodes)

	for _, c := range []*guest.Cycle{web, train} {
		c.EachNode(func(n *guest.NodeInfo) bool {
			st := g.filter(c, n)
			fmt.Printf("%s on %s: %v %q\n", c.Pod.Key(), n.Name(), st.Code, st.Reasons)
			return true
		})
	}
	// Output:
	// shop/web on cpu-1: Success []
	// shop/web on gpu-1: UnschedulableAndUnresolvable ["gpuguard: node has nvidia.com/gpu and the pod requests none"]
	// ml/train on cpu-1: Success []
	// ml/train on gpu-1: Success []
}

// Example_settings shows gpuguard's settings: defaults, an override, and
// the two ways settings are refused at load time.
func Example_settings() {
	for _, raw := range []string{
		``,
		`{"resource": "amd.com/gpu"}`,
		`{"resource": ""}`,
		`{"resources": "amd.com/gpu"}`,
	} {
		label := raw
		if label == "" {
			label = "(none)"
		}
		g, err := guest.Load([]byte(raw), defaultSettings(), newGuard)
		if err != nil {
			fmt.Printf("%-30s rejected: %v\n", label, err)
			continue
		}
		fmt.Printf("%-30s resource %s\n", label, g.resource)
	}
	// Output:
	// (none)                         resource nvidia.com/gpu
	// {"resource": "amd.com/gpu"}    resource amd.com/gpu
	// {"resource": ""}               rejected: settings: "resource" must not be empty
	// {"resources": "amd.com/gpu"}   rejected: settings: json: unknown field "resources"
}

// readmeBlock returns the body of the fenced block of README.md that
// directly follows the line ending in intro.
func readmeBlock(t *testing.T, intro string) []byte {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)" + regexp.QuoteMeta(intro) + "\n\n```\\w*\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatalf("README.md has no fenced block after %q", intro)
	}
	return m[1]
}

// declarations returns the top-level declarations of a Go file, formatted
// with their doc comments, by name (methods as Type.Method).
func declarations(t *testing.T, name string, src []byte) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	add := func(key string, node any) {
		var b bytes.Buffer
		if err := format.Node(&b, fset, &printer.CommentedNode{Node: node, Comments: f.Comments}); err != nil {
			t.Fatal(err)
		}
		out[key] = b.String()
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			key := d.Name.Name
			if d.Recv != nil {
				typ := d.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				key = typ.(*ast.Ident).Name + "." + key
			}
			add(key, d)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				if ts, ok := s.(*ast.TypeSpec); ok {
					add(ts.Name.Name, d)
				}
			}
		}
	}
	return out
}

// TestREADMEPolicyIsTested checks that the policy of README.md is the one
// the examples above run: every declaration of its main.go but init and
// main appears in this file unchanged, doc comment included.
func TestREADMEPolicyIsTested(t *testing.T) {
	readme := declarations(t, "README.md", readmeBlock(t, "`main.go`:"))
	self, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	here := declarations(t, "example_test.go", self)
	var checked []string
	for name, src := range readme {
		if name == "init" || name == "main" {
			continue
		}
		checked = append(checked, name)
		if here[name] != src {
			t.Errorf("%s differs between README.md and example_test.go:\nREADME.md:\n%s\nexample_test.go:\n%s", name, src, here[name])
		}
	}
	if len(checked) != 5 {
		t.Errorf("checked %v, want settings, defaultSettings, guard, newGuard and guard.filter", checked)
	}
}
