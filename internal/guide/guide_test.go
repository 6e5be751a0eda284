package guide

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// TestMain gives the tests a compilation cache of their own: TestREADMEEval
// runs `wasmsched eval`, which would otherwise compile into the user's.
func TestMain(m *testing.M) { testwasm.Main(m) }

// readme is the guide these tests check, relative to this package.
const readme = "../../guest/README.md"

// readmeBlock returns the body of the fenced block of README.md that
// directly follows the line ending in intro.
func readmeBlock(t *testing.T, intro string) []byte {
	t.Helper()
	readme, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)" + regexp.QuoteMeta(intro) + "\n\n```\\w*\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatalf("README.md has no fenced block after %q", intro)
	}
	return m[1]
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

// TestREADMECode compiles and runs the Go code of guest/README.md: every complete
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
	root := testwasm.Root(t)
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
	guide, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	built := 1
	for i, f := range testwasm.Fences(string(guide)) {
		body := f.Body
		if f.Lang != "go" || !strings.Contains(body, "\nfunc main() {}\n") || strings.Contains(body, "type guard struct") {
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

// TestREADMEEval runs each shell block of guest/README.md that calls
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
	root := testwasm.Root(t)
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testwasm.CLI(t), filepath.Join(work, "bin", "wasmsched")); err != nil {
		t.Fatal(err)
	}
	// The examples the guide's eval commands name (the pod-group one
	// composes gpu and topology).
	for _, name := range []string{"nodepin", "gpu", "topology"} {
		goCommand(t, root, []string{"GOOS=wasip1", "GOARCH=wasm"}, "build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w",
			"-o", filepath.Join(work, "bin", "policies", name+".wasm"), "./examples/"+name)
	}
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
	guide, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	ran := testwasm.RunShownBlocks(t, "guest/README.md", string(guide), work, tmp, "bin/wasmsched eval", normalize)
	if ran < 2 {
		t.Errorf("ran %d eval blocks, want at least 2", ran)
	}
}
