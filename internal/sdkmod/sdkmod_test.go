package sdkmod

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// root is the repository root, relative to this package.
const root = "../.."

// TestStandAlone holds the SDK modules to what authors are promised: no
// replace directive (it would not apply in an author's module anyway), and
// no requirement on Kubernetes or on the scheduler's module, so an author's
// module graph holds protobuf, the SDK and little else.
func TestStandAlone(t *testing.T) {
	mods, err := Modules(root)
	if err != nil {
		t.Fatal(err)
	}
	sdk := map[string]bool{}
	for _, m := range mods {
		sdk[m.Path] = true
	}
	for _, m := range mods {
		if want := RootPath + "/" + m.Dir; m.Path != want {
			t.Errorf("%s/go.mod: module %s, want %s", m.Dir, m.Path, want)
		}
		for _, r := range m.File.Replace {
			t.Errorf("%s/go.mod: replace %s => %s: the SDK modules carry no replace directive", m.Dir, r.Old.Path, r.New.Path)
		}
		for _, r := range m.File.Require {
			p := r.Mod.Path
			switch {
			case strings.HasPrefix(p, "k8s.io/"):
				t.Errorf("%s/go.mod requires %s: the SDK must not depend on Kubernetes", m.Dir, p)
			case p == RootPath || (strings.HasPrefix(p, RootPath+"/") && !sdk[p]):
				t.Errorf("%s/go.mod requires %s: the SDK must not depend on the scheduler's module", m.Dir, p)
			case p == m.Path:
				t.Errorf("%s/go.mod requires itself", m.Dir)
			}
		}
		if _, err := os.Stat(filepath.Join(root, m.Dir, "go.sum")); err != nil {
			t.Errorf("%s has no go.sum of its own: %v", m.Dir, err)
		}
	}
}

// TestTagsAreFrozen checks that an SDK module whose version is tagged
// already (abi/v0.1.0, ...) has not changed since: the root go.mod must
// then require the next version, the one the tree will be tagged as.
func TestTagsAreFrozen(t *testing.T) {
	mods, err := Modules(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		tag := m.Dir + "/" + m.Version
		if exec.Command("git", "-C", root, "rev-parse", "-q", "--verify", "refs/tags/"+tag).Run() != nil {
			continue // not tagged yet: the tree is what the tag will be
		}
		out, err := exec.Command("git", "-C", root, "status", "--porcelain", "--", m.Dir).Output()
		diff := exec.Command("git", "-C", root, "diff", "--quiet", tag, "--", m.Dir).Run()
		if err != nil || diff != nil || len(out) > 0 {
			t.Errorf("%s changed since its tag %s: require the next version (the tag it will get) in go.mod", m.Dir, tag)
		}
	}
}

// TestOutsideTheWorkspace builds, vets and tests each SDK module on its own
// (GOWORK=off), resolving the other from WriteProxy's proxy, with its own
// go.mod and go.sum only (-mod=readonly): this is what an author's module
// sees once the modules are tagged.
func TestOutsideTheWorkspace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the SDK modules in a module cache of their own")
	}
	if runtime.GOOS == "wasip1" {
		t.Skip("needs the go command")
	}
	env := standaloneEnv(t)
	for _, dir := range Dirs {
		d := filepath.Join(root, dir)
		out := goCmd(t, d, env, "list", "-m", "all")
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if p, _, _ := strings.Cut(line, " "); strings.HasPrefix(p, "k8s.io/") || p == RootPath {
				t.Errorf("%s: go list -m all lists %s", dir, line)
			}
		}
		goCmd(t, d, env, "build", "./...")
		goCmd(t, d, env, "vet", "./...")
		goCmd(t, d, env, "test", "-count=1", "./...")
	}
}

// TestAuthorModule is a policy author's module outside the repository: it
// requires the SDK, with no replace directive, and its go.mod, native tests
// (guesttest on YAML testdata) and WebAssembly build work.
func TestAuthorModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module in a module cache of its own")
	}
	if runtime.GOOS == "wasip1" {
		t.Skip("needs the go command")
	}
	mods, err := Modules(root)
	if err != nil {
		t.Fatal(err)
	}
	var guestVersion string
	for _, m := range mods {
		if m.Dir == "guest" {
			guestVersion = m.Version
		}
	}
	dir := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":            "module example.com/zonepin\n\ngo 1.24\n\nrequire " + RootPath + "/guest " + guestVersion + "\n",
		"main.go":           authorMain,
		"main_test.go":      authorTest,
		"testdata/pod.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: c, resources: {requests: {cpu: 100m}}}]\n",
		"testdata/nodes.yaml": "kind: Node\nmetadata: {name: a-1, labels: {topology.kubernetes.io/zone: a}}\n---\n" +
			"kind: Node\nmetadata: {name: b-1, labels: {topology.kubernetes.io/zone: b}}\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := standaloneEnv(t)
	env = append(env, "GOFLAGS=-modcacherw") // go mod tidy writes go.sum
	goCmd(t, dir, env, "mod", "tidy")
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(gomod), "replace") {
		t.Errorf("the author's go.mod needed a replace directive:\n%s", gomod)
	}
	list := goCmd(t, dir, env, "list", "-m", "all")
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if p, _, _ := strings.Cut(line, " "); strings.HasPrefix(p, "k8s.io/") || p == RootPath {
			t.Errorf("the author's go list -m all lists %s", line)
		}
	}
	if !strings.Contains(list, RootPath+"/abi ") || !strings.Contains(list, RootPath+"/guest ") {
		t.Errorf("the author's go list -m all lacks the SDK:\n%s", list)
	}
	goCmd(t, dir, env, "vet", "./...")
	goCmd(t, dir, env, "test", "-count=1", "./...")
	goCmd(t, dir, append(env, "GOOS=wasip1", "GOARCH=wasm"), "build", "-buildmode=c-shared", "-o", filepath.Join(dir, "p.wasm"), ".")
}

// authorMain is the author's policy: pods stay in one zone.
const authorMain = `package main

import (
	"errors"

	"github.com/wasmsched/wasmsched/guest"
)

type Settings struct {
	Zone string ` + "`json:\"zone\"`" + `
}

func DefaultSettings() Settings { return Settings{Zone: "a"} }

type Policy struct{ reject guest.Status; zone string }

func New(s Settings) (*Policy, error) {
	if s.Zone == "" {
		return nil, errors.New("settings: zone is empty")
	}
	return &Policy{zone: s.Zone, reject: guest.RejectUnresolvable("zonepin: not in zone %s", s.Zone)}, nil
}

func (p *Policy) Filter(_ *guest.Cycle, n *guest.NodeInfo) guest.Status {
	if n.Zone() != p.zone {
		return p.reject
	}
	return guest.OK()
}

var policy *Policy

func init() {
	guest.Register(&guest.Policy{
		Name: "zonepin",
		Settings: func(raw []byte) (err error) {
			policy, err = guest.Load(raw, DefaultSettings(), New)
			return err
		},
		Filter: func(c *guest.Cycle, n *guest.NodeInfo) guest.Status { return policy.Filter(c, n) },
	})
}

func main() {}
`

// authorTest is the author's native test, on YAML testdata.
const authorTest = `package main

import (
	"testing"

	"github.com/wasmsched/wasmsched/guest"
	"github.com/wasmsched/wasmsched/guest/guesttest"
)

func TestFilter(t *testing.T) {
	p := guesttest.Load(t, ` + "`{\"zone\": \"b\"}`" + `, DefaultSettings(), New)
	c := guesttest.NewCycle(guesttest.ReadPod(t, "testdata/pod.yaml"), guesttest.ReadNodes(t, "testdata/nodes.yaml")...)
	guesttest.CheckStatus(t, p.Filter(c, c.NodeByName("a-1")), guest.RejectUnresolvable("zonepin: not in zone b"))
	guesttest.CheckStatus(t, p.Filter(c, c.NodeByName("b-1")), guest.OK())
}
`

// standaloneEnv writes the SDK modules' proxy and returns the environment
// of a go command outside the workspace that uses it, with a module cache
// of its own (writable, so the test can remove it) and no checksum
// database: go.sum files are checked, nothing is looked up.
func standaloneEnv(t *testing.T) []string {
	t.Helper()
	mods, err := Modules(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	proxy := filepath.Join(dir, "proxy")
	if err := WriteProxy(proxy, root, mods); err != nil {
		t.Fatal(err)
	}
	env, err := Env(proxy, filepath.Join(dir, "modcache"))
	if err != nil {
		t.Fatal(err)
	}
	return append(env, "GOFLAGS=-mod=readonly -modcacherw", "GOSUMDB=off", "GOTOOLCHAIN=local")
}

// goCmd runs the go command in dir and returns its standard output,
// failing the test with everything it printed if it fails.
func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		hint := ""
		if strings.Contains(stderr.String(), "checksum mismatch") {
			hint = "\nabi/ changed since guest/go.sum was written: run make sdk-tidy"
		}
		t.Fatalf("in %s: go %s: %v\n%s%s%s", dir, strings.Join(args, " "), err, stdout.String(), stderr.String(), hint)
	}
	return stdout.String()
}
