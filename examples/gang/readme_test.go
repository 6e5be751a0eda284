//go:build !wasip1

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// fence matches one fenced block of README.md: its language and body.
var fence = regexp.MustCompile("(?s)```(\\w*)\n(.*?)```")

// TestREADMEEvalOutput runs every `wasmsched eval` command of README.md, with
// a freshly built CLI and module, and compares its output with the block
// that follows it, so the README keeps showing real output.
func TestREADMEEvalOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/wasmsched")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	root := testwasm.Root(t)
	cli := filepath.Join(t.TempDir(), "wasmsched")
	build := exec.Command("go", "build", "-o", cli, "./cmd/wasmsched")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build wasmsched: %v\n%s", err, out)
	}
	// The CLI names a policy after its file.
	wasm := filepath.Join(filepath.Dir(cli), "gang.wasm")
	if err := os.WriteFile(wasm, testwasm.Bytes(t, "examples/gang"), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks := fence.FindAllStringSubmatch(string(readme), -1)
	ran := 0
	for i, b := range blocks {
		if b[1] != "sh" || i+1 == len(blocks) {
			continue
		}
		for _, line := range strings.Split(strings.ReplaceAll(b[2], "\\\n", " "), "\n") {
			args := strings.Fields(line)
			if len(args) < 2 || args[0] != "/tmp/wasmsched" || args[1] != "eval" {
				continue
			}
			args[0] = cli
			for j, a := range args {
				if a == "/tmp/gang.wasm" {
					args[j] = wasm
				}
			}
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Dir = root
			got, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			if want := blocks[i+1][2]; string(got) != want {
				t.Errorf("%s\ngot:\n%s\nREADME shows:\n%s", line, got, want)
			}
			ran++
		}
	}
	if ran == 0 {
		t.Fatal("README.md shows no wasmsched eval command")
	}
}
