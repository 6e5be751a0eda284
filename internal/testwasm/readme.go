package testwasm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fence matches one fenced block of a Markdown file: its language and body.
var fence = regexp.MustCompile("(?s)```(\\w*)\n(.*?)```")

// Fence is one fenced block of a Markdown text.
type Fence struct {
	Lang string // what follows the opening ```: "sh", "text", "go", ...
	Body string
}

// Fences returns the fenced blocks of a Markdown text, in order.
func Fences(markdown string) []Fence {
	var out []Fence
	for _, m := range fence.FindAllStringSubmatch(markdown, -1) {
		out = append(out, Fence{Lang: m[1], Body: m[2]})
	}
	return out
}

// RunShownBlocks runs, with sh in dir, every sh block of the Markdown file
// doc (named so in messages) that contains marker, each of its /tmp/
// pointing at tmp, and fails t unless its output, through normalize, is the
// text block that follows it, through normalize. A command that fails is
// part of what is shown. It returns how many blocks ran.
func RunShownBlocks(t *testing.T, doc, markdown, dir, tmp, marker string, normalize func(string) string) int {
	t.Helper()
	fences := Fences(markdown)
	ran := 0
	for i, f := range fences {
		if f.Lang != "sh" || !strings.Contains(f.Body, marker) {
			continue
		}
		if i+1 == len(fences) || fences[i+1].Lang != "text" {
			t.Errorf("%s: the block running %q is not followed by a text block with its output", doc, f.Body)
			continue
		}
		cmd := exec.Command("sh", "-c", strings.ReplaceAll(f.Body, "/tmp/", tmp+"/"))
		cmd.Dir = dir
		out, _ := cmd.CombinedOutput() // a failing command is part of the show
		if got, want := normalize(string(out)), normalize(fences[i+1].Body); got != want {
			t.Errorf("%s\noutput:\n%s\n%s shows:\n%s", f.Body, got, doc, want)
		}
		ran++
	}
	return ran
}

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
	blocks := Fences(string(text))
	ran := 0
	for i := 0; i+1 < len(blocks); i++ {
		for _, line := range strings.Split(strings.ReplaceAll(blocks[i].Body, "\\\n", " "), "\n") {
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
			if want := blocks[i+1].Body; string(got) != want {
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

// DocCommand is a command line shown in the repository's documentation.
type DocCommand struct {
	// Where is the Markdown file, relative to the repository root, and the
	// line: "README.md:22".
	Where string
	// Args are the words after the program, up to a comment, a pipe, a
	// redirection or the next command.
	Args []string
}

// shellFence is the info string of a fenced block of shell commands.
var shellFence = regexp.MustCompile("^(sh|bash|shell|console)$")

// DocCommands returns every command line that runs program (a name such as
// "wasmsched" or "make") in the repository's Markdown files (README.md,
// docs/, guest/, examples/..., outside hidden directories and bin/): in
// shell blocks (```sh, bash, shell, console; a trailing backslash continues
// a line) and in inline code, each command whose first word is program,
// with or without a directory (bin/wasmsched, /tmp/wasmsched). A command
// after ;, | or && counts too. Output, such as an error line quoted
// inline (`wasmsched eval: policy ...`), is the caller's to tell apart.
func DocCommands(tb testing.TB, program string) []DocCommand {
	tb.Helper()
	root := Root(tb)
	var out []DocCommand
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".md") {
			return nil
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, c := range codeLines(string(text)) {
			for _, args := range commandsOf(c.text, program) {
				out = append(out, DocCommand{Where: fmt.Sprintf("%s:%d", rel, c.line), Args: args})
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// codeLine is a line of shell code, or an inline code span, of a Markdown
// file, with its line number.
type codeLine struct {
	line int
	text string
}

var inlineCode = regexp.MustCompile("`([^`]+)`")

// codeLines returns the lines of shell blocks (continuations joined) and
// the inline code spans of the other lines of a Markdown text.
func codeLines(text string) []codeLine {
	var out []codeLine
	inFence, shell := false, false
	var cont *codeLine
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			inFence = !inFence
			shell = inFence && shellFence.MatchString(strings.TrimPrefix(trimmed, "```"))
			cont = nil
			continue
		}
		switch {
		case inFence && shell:
			if cont != nil {
				cont.text += " " + strings.TrimSuffix(trimmed, "\\")
			} else {
				out = append(out, codeLine{i + 1, strings.TrimSuffix(trimmed, "\\")})
				cont = &out[len(out)-1]
			}
			if !strings.HasSuffix(trimmed, "\\") {
				cont = nil
			}
		case !inFence:
			for _, m := range inlineCode.FindAllStringSubmatch(line, -1) {
				out = append(out, codeLine{i + 1, m[1]})
			}
		}
	}
	return out
}

// commandsOf returns the arguments of each command of a shell line whose
// first word is program, with or without a directory.
func commandsOf(line, program string) [][]string {
	var out [][]string
	var words []string
	for _, w := range strings.Fields(strings.TrimPrefix(line, "$ ")) {
		if w != ";" && strings.HasSuffix(w, ";") {
			words = append(words, strings.TrimSuffix(w, ";"), ";")
			continue
		}
		words = append(words, w)
	}
	start := true
	for i := 0; i < len(words); i++ {
		w := words[i]
		if strings.HasPrefix(w, "#") {
			break
		}
		if w == ";" || w == "|" || w == "&&" || w == "||" {
			start = true
			continue
		}
		if !start {
			continue
		}
		start = false
		if w != program && !strings.HasSuffix(w, "/"+program) {
			continue
		}
		var args []string
		for _, a := range words[i+1:] {
			if a == ";" || a == "|" || a == "&&" || a == "||" || strings.HasPrefix(a, "#") || strings.HasPrefix(a, ">") || strings.HasPrefix(a, "<") {
				break
			}
			args = append(args, a)
		}
		out = append(out, args)
	}
	return out
}
