package guest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
	"github.com/wasmsched/wasmsched/internal/testwasm"
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

// parseSettings decodes the operator's JSON over the defaults and
// validates the result.
func parseSettings(raw []byte) (settings, error) {
	s := settings{Resource: "nvidia.com/gpu"}
	if err := guest.ParseSettings(raw, &s); err != nil {
		return s, err
	}
	if s.Resource == "" {
		return s, errors.New(`settings: "resource" must not be empty`)
	}
	return s, nil
}

// guard is the policy, built once from valid settings.
type guard struct {
	resource string
	// rejected is the one rejection the policy makes, built once.
	rejected guest.Status
}

func newGuard(s settings) *guard {
	return &guard{
		resource: s.Resource,
		rejected: guest.RejectUnresolvable("gpuguard: node has %s and the pod requests none", s.Resource),
	}
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
	s, err := parseSettings(nil) // no settings: the defaults
	if err != nil {
		panic(err)
	}
	g := newGuard(s)

	cpuNode := &guest.NodeInfo{NodeInfo: &abiv1.NodeInfo{Node: &abiv1.Node{
		Name:        "cpu-1",
		Allocatable: &abiv1.Resources{MilliCpu: 8000, Memory: 32 << 30, Pods: 110},
	}}}
	gpuNode := &guest.NodeInfo{NodeInfo: &abiv1.NodeInfo{Node: &abiv1.Node{
		Name: "gpu-1",
		Allocatable: &abiv1.Resources{MilliCpu: 8000, Memory: 32 << 30, Pods: 110,
			Scalars: []*abiv1.Scalar{{Name: "nvidia.com/gpu", Value: 4}}},
	}}}
	web := &guest.Cycle{Pod: &guest.Pod{Pod: &abiv1.Pod{
		Name: "web", Namespace: "shop",
		Requests: &abiv1.Resources{MilliCpu: 500, Memory: 256 << 20},
	}}}
	train := &guest.Cycle{Pod: &guest.Pod{Pod: &abiv1.Pod{
		Name: "train", Namespace: "ml",
		Requests: &abiv1.Resources{MilliCpu: 4000, Scalars: []*abiv1.Scalar{{Name: "nvidia.com/gpu", Value: 1}}},
	}}}

	for _, c := range []*guest.Cycle{web, train} {
		for _, n := range []*guest.NodeInfo{cpuNode, gpuNode} {
			st := g.filter(c, n)
			fmt.Printf("%s on %s: %v %q\n", c.Pod.Key(), n.Name(), st.Code, st.Reasons)
		}
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
		s, err := parseSettings([]byte(raw))
		if err != nil {
			fmt.Printf("%-30s rejected: %v\n", label, err)
			continue
		}
		fmt.Printf("%-30s resource %s\n", label, s.Resource)
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

// readmeFences returns every fenced block of README.md: language and body.
func readmeFences(t *testing.T) [][2]string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	for _, m := range regexp.MustCompile("(?s)```(\\w*)\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		out = append(out, [2]string{m[1], m[2]})
	}
	return out
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
		t.Errorf("checked %v, want settings, parseSettings, guard, newGuard and guard.filter", checked)
	}
}

// goCommand runs the go command in dir and fails the test with its output
// if it fails.
func goCommand(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// overlay writes a go build overlay that adds files (path in the module ->
// contents) without touching the source tree, and returns its path.
func overlay(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	replace := map[string]string{}
	i := 0
	for path, body := range files {
		i++
		backing := filepath.Join(dir, fmt.Sprintf("%d.go", i))
		if err := os.WriteFile(backing, body, 0o644); err != nil {
			t.Fatal(err)
		}
		replace[path] = backing
	}
	b, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestREADMECode compiles and runs the Go code of README.md: every complete
// policy is built as a reactor with the README's command, gpuguard's
// main_test.go runs against its main.go, and nodepin's wasm_test.go runs in
// examples/nodepin. The files are added through build overlays, in package
// directories that do not exist on disk.
func TestREADMECode(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the go command")
	}
	if runtime.GOOS == "wasip1" {
		t.Skip("needs the go command")
	}
	root := filepath.Dir(mustGetwd(t))
	wasip1 := []string{"GOOS=wasip1", "GOARCH=wasm"}

	// gpuguard: its unit tests natively, then the module.
	dir := filepath.Join(root, "guest", "zz_readme_gpuguard")
	ov := overlay(t, map[string][]byte{
		filepath.Join(dir, "main.go"):      readmeBlock(t, "`main.go`:"),
		filepath.Join(dir, "main_test.go"): readmeBlock(t, "For gpuguard, `main_test.go`:"),
	})
	// The package directory does not exist, so the test binary is built,
	// then run elsewhere.
	bin := filepath.Join(t.TempDir(), "gpuguard.test")
	goCommand(t, root, nil, "test", "-c", "-vet=off", "-overlay", ov, "-o", bin, "./guest/zz_readme_gpuguard")
	run := exec.Command(bin, "-test.v")
	run.Dir = t.TempDir()
	out, err := run.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestFilter")) || !bytes.Contains(out, []byte("--- PASS: TestSettings")) {
		t.Fatalf("README's main_test.go: %v\n%s", err, out)
	}
	goCommand(t, root, wasip1, "build", "-overlay", ov, "-buildmode=c-shared", "-o", filepath.Join(t.TempDir(), "p.wasm"), "./guest/zz_readme_gpuguard")

	// Every other complete policy.
	built := 1
	for i, f := range readmeFences(t) {
		body := f[1]
		if f[0] != "go" || !strings.Contains(body, "\nfunc main() {}\n") || strings.Contains(body, "type guard struct") {
			continue
		}
		pkg := fmt.Sprintf("zz_readme_%d", i)
		ov := overlay(t, map[string][]byte{filepath.Join(root, "guest", pkg, "main.go"): []byte(body)})
		goCommand(t, root, wasip1, "build", "-overlay", ov, "-buildmode=c-shared", "-o", filepath.Join(t.TempDir(), "p.wasm"), "./guest/"+pkg)
		built++
	}
	if built < 2 {
		t.Errorf("built %d policies from README.md, want gpuguard and gpuheadroom", built)
	}

	// nodepin's wasm-level test.
	ov = overlay(t, map[string][]byte{
		filepath.Join(root, "examples", "nodepin", "wasm_test.go"): readmeBlock(t, "`wasm_test.go` next to its `main.go`:"),
	})
	goCommand(t, root, []string{"WASMSCHED_CACHE_DIR=" + t.TempDir()}, "test", "-count=1", "-overlay", ov, "-run", "^TestWasm$", "./examples/nodepin")
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// TestREADMEEval runs each shell block of README.md that calls
// `bin/wasmsched eval`, in a directory laid out as after `make build
// examples`, and compares its output with the text block that follows it.
// Module digests (policy@<12 hex digits>) change with every build and are
// not compared.
func TestREADMEEval(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds cmd/wasmsched")
	}
	if runtime.GOOS == "wasip1" {
		t.Skip("needs the go command")
	}
	root := filepath.Dir(mustGetwd(t))
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testwasm.CLI(t), filepath.Join(work, "bin", "wasmsched")); err != nil {
		t.Fatal(err)
	}
	goCommand(t, root, []string{"GOOS=wasip1", "GOARCH=wasm"}, "build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w",
		"-o", filepath.Join(work, "bin", "policies", "nodepin.wasm"), "./examples/nodepin")
	if err := os.Symlink(filepath.Join(root, "examples"), filepath.Join(work, "examples")); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	digest := regexp.MustCompile(`@[0-9a-f]{12}:`)
	normalize := func(s string) string {
		lines := strings.Split(strings.TrimSpace(digest.ReplaceAllString(s, "@DIGEST:")), "\n")
		for i, l := range lines {
			lines[i] = strings.TrimRight(l, " ")
		}
		return strings.Join(lines, "\n")
	}
	fences := readmeFences(t)
	ran := 0
	for i, f := range fences {
		if f[0] != "sh" || !strings.Contains(f[1], "bin/wasmsched eval") {
			continue
		}
		if i+1 == len(fences) || fences[i+1][0] != "text" {
			t.Errorf("the block running %q is not followed by a text block with its output", f[1])
			continue
		}
		script := strings.ReplaceAll(f[1], "/tmp/", tmp+"/")
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = work
		out, _ := cmd.CombinedOutput() // a failing command is part of the show
		if got, want := normalize(string(out)), normalize(fences[i+1][1]); got != want {
			t.Errorf("%s\noutput:\n%s\nREADME.md shows:\n%s", f[1], got, want)
		}
		ran++
	}
	if ran < 2 {
		t.Errorf("ran %d eval blocks, want at least 2", ran)
	}
}
