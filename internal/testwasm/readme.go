package testwasm

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fence matches one fenced block of a Markdown file: its body.
var fence = regexp.MustCompile("(?s)```\\w*\n(.*?)```")

// CheckREADMEEval runs every `/tmp/wasmsched eval` command shown in the
// Markdown file readme, with a freshly built CLI and with /tmp/<name>.wasm
// replaced by the module built from examples/<name>, and fails unless its
// output is exactly the fenced block that follows the command's block. It
// keeps the READMEs of the examples showing real output.
func CheckREADMEEval(t *testing.T, readme, name string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds cmd/wasmsched")
	}
	text, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	root := Root(t)
	dir := t.TempDir()
	cli := CLI(t)
	// The CLI names a policy after its file: keep the README's name.
	wasm := filepath.Join(dir, name+".wasm")
	if err := os.WriteFile(wasm, Bytes(t, "examples/"+name), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks := fence.FindAllStringSubmatch(string(text), -1)
	ran := 0
	for i := 0; i+1 < len(blocks); i++ {
		for _, line := range strings.Split(strings.ReplaceAll(blocks[i][1], "\\\n", " "), "\n") {
			args := strings.Fields(strings.TrimPrefix(line, "$ "))
			if len(args) < 2 || args[0] != "/tmp/wasmsched" || args[1] != "eval" {
				continue
			}
			args[0] = cli
			for j, a := range args {
				if a == "/tmp/"+name+".wasm" {
					args[j] = wasm
				}
			}
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Dir = root
			got, err := cmd.Output()
			if err != nil {
				t.Errorf("%s: %v", line, err)
				continue
			}
			if want := blocks[i+1][1]; string(got) != want {
				t.Errorf("%s\noutput:\n%s\n%s shows:\n%s", line, got, readme, want)
			}
			ran++
		}
	}
	if ran == 0 {
		t.Fatalf("%s shows no /tmp/wasmsched eval command", readme)
	}
}

// CLI builds cmd/wasmsched once for every test process of this checkout
// and returns the binary's path. The build runs under a file lock in a
// directory shared by the processes; `go build` leaves an up-to-date binary
// alone, so only the first caller after a change pays for the link.
func CLI(tb testing.TB) string {
	tb.Helper()
	root := Root(tb)
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "wasmsched-cli-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	defer lock.Close()
	if err := lockFile(lock); err != nil {
		tb.Fatalf("lock %s: %v", lock.Name(), err)
	}
	cli := filepath.Join(dir, "wasmsched")
	build := exec.Command("go", "build", "-o", cli, "./cmd/wasmsched")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("build cmd/wasmsched: %v\n%s", err, out)
	}
	return cli
}
