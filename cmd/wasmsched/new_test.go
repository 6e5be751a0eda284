package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// newProject scaffolds a project named quota into a temporary directory
// outside the repository, with the SDK taken from this checkout (what a
// published version would give), and returns its directory.
func newProject(t *testing.T) string {
	t.Helper()
	root := testwasm.Root(t)
	dir := filepath.Join(t.TempDir(), "quota")
	code, out, errs := runCLI("new", "--sdk", root, "--dir", dir, "quota")
	if code != 0 {
		t.Fatalf("wasmsched new: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "Created "+dir+" (module example.com/quota, SDK v") {
		t.Fatalf("wasmsched new printed:\n%s", out)
	}
	return dir
}

// inProject runs a command in dir, outside any Go workspace, with env
// added to the environment, and returns its output.
func inProject(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off", "GOFLAGS="), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// TestNewProject: a project `wasmsched new` writes builds as written, its
// unit tests pass, `wasmsched test` passes its scenarios on the module it
// built, and its module graph is the SDK, the ABI and protobuf, with the
// SDK resolved through the local replace only.
func TestNewProject(t *testing.T) {
	dir := newProject(t)
	for _, f := range []string{"go.mod", "go.sum", "main.go", "quota_test.go", "scenarios/quota.yaml", "Makefile", "README.md", ".gitignore"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the project lacks %s: %v", f, err)
		}
	}
	out := inProject(t, dir, nil, "make", "test", "WASMSCHED="+testwasm.CLI(t))
	if !strings.Contains(out, "ok  \texample.com/quota") || !strings.Contains(out, "3 passed, 0 failed") {
		t.Fatalf("make test:\n%s", out)
	}

	// Without TinyGo, make tinygo says where it comes from.
	cmd := exec.Command("make", "tinygo", "TINYGO=no-such-tinygo")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "make tinygo: no TinyGo at 'no-such-tinygo'. Install TinyGo") ||
		!strings.Contains(string(out), "'make tinygo' in a wasmsched checkout puts it in .bin/tinygo") {
		t.Errorf("make tinygo without TinyGo: %v\n%s", err, out)
	}

	mods := inProject(t, dir, nil, "go", "list", "-m", "all")
	t.Logf("go list -m all:\n%s", mods)
	root := testwasm.Root(t)
	for _, want := range []string{
		"example.com/quota\n",
		"github.com/wasmsched/wasmsched/guest v0.1.0 => " + filepath.Join(root, "guest"),
		"github.com/wasmsched/wasmsched/abi v0.1.0 => " + filepath.Join(root, "abi"),
		"google.golang.org/protobuf ",
	} {
		if !strings.Contains(mods, want) {
			t.Errorf("go list -m all lacks %q", want)
		}
	}
	for _, unwanted := range []string{"k8s.io/", "github.com/wasmsched/wasmsched "} {
		if strings.Contains(mods, unwanted) {
			t.Errorf("go list -m all lists %q: the SDK must not pull the scheduler's dependencies", unwanted)
		}
	}
}

// TestNewProjectTinyGo: the same project built with TinyGo by its own
// Makefile (this machine's toolchain needs its target file) passes the same
// scenarios. Run by make test-tinygo, in parallel with the other TinyGo
// tests: a TinyGo build keeps one core busy for about 15 s.
func TestNewProjectTinyGo(t *testing.T) {
	t.Parallel()
	tinygo := testwasm.TinyGo(t)
	dir := newProject(t)
	root := testwasm.Root(t)
	out := inProject(t, dir, nil, "make", "scenarios-tinygo", "TINYGO="+tinygo,
		"TINYGO_TARGET="+filepath.Join(root, testwasm.TinyGoTarget), "WASMSCHED="+testwasm.CLI(t))
	if !strings.Contains(out, "3 passed, 0 failed") {
		t.Fatalf("make scenarios-tinygo:\n%s", out)
	}
}

func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"new"}, "no NAME given"},
		{[]string{"new", "Quota"}, `name "Quota": use lower-case letters`},
		{[]string{"new", "--sdk", dir, "quota"}, "not a wasmsched checkout (no guest/go.mod)"},
		{[]string{"new", "--dir", filepath.Dir(testwasm.Root(t)), "quota"}, "exists and is not empty"},
	} {
		code, _, errs := runCLI(tc.args...)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, errs, tc.want)
		}
	}
}

// guideStart returns the shell blocks of the guide's "Start a project"
// section, in order.
func guideStart(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testwasm.Root(t), "guest", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Start a project\n")
	if !ok {
		t.Fatal(`guest/README.md has no "## Start a project" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks []string
	for _, f := range testwasm.Fences(section) {
		if f.Lang == "sh" {
			blocks = append(blocks, f.Body)
		}
	}
	if len(blocks) != 2 {
		t.Fatalf(`"Start a project" has %d shell blocks, want 2 (Go, then TinyGo)`, len(blocks))
	}
	return blocks
}

// runGuide runs a block of the guide with bash in home (as $HOME), with
// this checkout's wasmsched first on the PATH and the SDK taken from this
// checkout (WASMSCHED_SDK, as the guide says until it is published).
func runGuide(t *testing.T, home, dir, block string, env ...string) string {
	t.Helper()
	// Go's caches stay where they are: by default they live in $HOME.
	caches, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatal(err)
	}
	c := strings.Split(strings.TrimSpace(string(caches)), "\n")
	if len(c) != 3 {
		t.Fatalf("go env printed %q", caches)
	}
	base := []string{"HOME=" + home, "GOCACHE=" + c[0], "GOMODCACHE=" + c[1], "GOPATH=" + c[2],
		"PATH=" + filepath.Dir(testwasm.CLI(t)) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"WASMSCHED_SDK=" + testwasm.Root(t)}
	return inProject(t, dir, append(base, env...), "bash", "-euo", "pipefail", "-c", block)
}

// TestGuideStart runs the guide's first commands as shown: from an empty
// home directory, wasmsched new, then make test in the new project. The
// TinyGo block runs in TestGuideStartTinyGo.
func TestGuideStart(t *testing.T) {
	home := t.TempDir()
	out := runGuide(t, home, home, guideStart(t)[0])
	if !strings.Contains(out, "3 passed, 0 failed") {
		t.Fatalf("make test:\n%s", out)
	}
}

// TestGuideStartTinyGo: the guide's TinyGo block, in the project its first
// block makes, with this machine's toolchain (and its target file) as the
// guide says to name one. Run by make test-tinygo, in parallel with the
// other TinyGo tests.
func TestGuideStartTinyGo(t *testing.T) {
	t.Parallel()
	tinygo := testwasm.TinyGo(t)
	home := t.TempDir()
	blocks := guideStart(t)
	runGuide(t, home, home, blocks[0])
	out := runGuide(t, home, filepath.Join(home, "policies", "quota"), blocks[1],
		"PATH="+filepath.Dir(tinygo)+string(os.PathListSeparator)+filepath.Dir(testwasm.CLI(t))+string(os.PathListSeparator)+os.Getenv("PATH"),
		"TINYGO_TARGET="+filepath.Join(testwasm.Root(t), testwasm.TinyGoTarget))
	if !strings.Contains(out, "3 passed, 0 failed") {
		t.Fatalf("make tinygo scenarios-tinygo:\n%s", out)
	}
}
