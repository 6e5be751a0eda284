package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// TestREADME runs each `/tmp/wasmsched eval` command shown in README.md
// with a freshly built CLI and module, and compares its output with the
// fenced block that follows the command's block, so that the README keeps
// showing real output.
func TestREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/wasmsched")
	}
	examples := readmeExamples(t, "README.md")
	if len(examples) == 0 {
		t.Fatal("README.md shows no /tmp/wasmsched eval command")
	}
	root := testwasm.Root(t)
	dir := t.TempDir()
	cli := filepath.Join(dir, "wasmsched")
	build := exec.Command("go", "build", "-o", cli, "./cmd/wasmsched")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build cmd/wasmsched: %v\n%s", err, out)
	}
	// The CLI names a policy after its file, so keep the README's name.
	wasm := filepath.Join(dir, "edge.wasm")
	if err := os.WriteFile(wasm, testwasm.Bytes(t, "examples/edge"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ex := range examples {
		args := strings.Fields(ex.command)
		args[0] = cli
		for i, a := range args {
			if a == "/tmp/edge.wasm" {
				args[i] = wasm
			}
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = root
		got, err := cmd.Output()
		if err != nil {
			t.Errorf("%s: %v", ex.command, err)
			continue
		}
		if string(got) != ex.output {
			t.Errorf("%s\noutput:\n%s\nREADME.md shows:\n%s", ex.command, got, ex.output)
		}
	}
}

// readmeExample is a command from a README and the output shown after it.
type readmeExample struct{ command, output string }

// readmeExamples collects the `/tmp/wasmsched eval` commands of the fenced
// blocks of a Markdown file (joining lines continued with a backslash), each
// with the body of the next fenced block.
func readmeExamples(t *testing.T, path string) []readmeExample {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		blocks  []string
		body    strings.Builder
		inBlock bool
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```") && inBlock:
			blocks = append(blocks, body.String())
			body.Reset()
			inBlock = false
		case strings.HasPrefix(line, "```"):
			inBlock = true
		case inBlock:
			body.WriteString(line + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var out []readmeExample
	for i := 0; i+1 < len(blocks); i++ {
		joined := strings.ReplaceAll(blocks[i], "\\\n", " ")
		for _, line := range strings.Split(joined, "\n") {
			if strings.HasPrefix(line, "/tmp/wasmsched eval ") {
				out = append(out, readmeExample{command: line, output: blocks[i+1]})
			}
		}
	}
	return out
}
