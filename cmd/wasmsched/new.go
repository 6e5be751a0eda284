package main

import (
	"bytes"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"text/template"
)

// skeleton is the project `wasmsched new` writes: every file is a template
// (text/template, delimiters [[ ]] so that Go and Make syntax stays
// readable), its name with ".tmpl" dropped and "NAME" replaced by the
// policy's name.
//
//go:embed all:skeleton
var skeleton embed.FS

// sdkModule is the SDK a new project depends on; the ABI module comes with
// it.
const (
	sdkModule = "github.com/wasmsched/wasmsched/guest"
	abiModule = "github.com/wasmsched/wasmsched/abi"
)

// validName is what a policy may be called: it names the directory, the
// module file and the policy in the scheduler's configuration.
var validName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// project is what the templates see.
type project struct {
	Name       string // the policy's name
	Module     string // the Go module path
	SDKVersion string // the SDK version required
	// SDKPath, when set, is a local checkout of this repository: go.mod
	// replaces the SDK and ABI modules with its directories.
	SDKPath   string
	GoVersion string
}

func runNew(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	module := fs.String("module", "", "Go module path of the new project (default example.com/NAME)")
	dir := fs.String("dir", "", "directory to create (default ./NAME)")
	sdk := fs.String("sdk", os.Getenv("WASMSCHED_SDK"), "a local checkout of wasmsched to take the SDK from (go.mod replaces the SDK with it), instead of the published version (default $WASMSCHED_SDK)")
	tidy := fs.Bool("tidy", true, "run `go mod tidy` in the new project (writes go.sum)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: wasmsched new [flags] NAME\n\nScaffolds a policy project in its own directory.\n\n")
		fs.PrintDefaults()
	}
	// Flags may follow the name too.
	var name string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return errUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if name != "" {
			return fmt.Errorf("unexpected argument %q", args[0])
		}
		name, args = args[0], args[1:]
	}
	if !validName.MatchString(name) {
		if name == "" {
			return errors.New("no NAME given")
		}
		return fmt.Errorf("name %q: use lower-case letters, digits and '-', starting with a letter, at most 63", name)
	}
	p := project{Name: name, Module: *module, SDKVersion: sdkVersion(), GoVersion: "1.26"}
	if p.Module == "" {
		p.Module = "example.com/" + name
	}
	if *sdk != "" {
		abs, err := filepath.Abs(*sdk)
		if err != nil {
			return err
		}
		for _, m := range []string{"guest", "abi"} {
			if _, err := os.Stat(filepath.Join(abs, m, "go.mod")); err != nil {
				return fmt.Errorf("--sdk %s: not a wasmsched checkout (no %s/go.mod)", *sdk, m)
			}
		}
		p.SDKPath = abs
	}
	target := *dir
	if target == "" {
		target = name
	}
	if entries, err := os.ReadDir(target); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s exists and is not empty", target)
	}
	files, err := render(p)
	if err != nil {
		return err
	}
	for _, f := range files {
		path := filepath.Join(target, f.path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, f.data, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "Created %s (module %s, SDK %s)\n", target, p.Module, p.SDKVersion)
	if *tidy {
		if err := goModTidy(target); err != nil {
			return fmt.Errorf("%s was created, but `go mod tidy` failed there (run it yourself once the SDK can be fetched, or pass --sdk with a wasmsched checkout): %v", target, err)
		}
	}
	fmt.Fprintf(stdout, "Next:\n  cd %s\n  make test    # unit tests, the module built, and its scenarios run by wasmsched test\n", target)
	return nil
}

type file struct {
	path string
	data []byte
}

// render fills in the skeleton for p.
func render(p project) ([]file, error) {
	var out []file
	err := iofs.WalkDir(skeleton, "skeleton", func(path string, d iofs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		src, err := skeleton.ReadFile(path)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(path, "skeleton/")
		rel = strings.ReplaceAll(strings.TrimSuffix(rel, ".tmpl"), "NAME", p.Name)
		rel = strings.Replace(rel, "dot-", ".", 1)
		t, err := template.New(rel).Delims("[[", "]]").Option("missingkey=error").Parse(string(src))
		if err != nil {
			return fmt.Errorf("skeleton %s: %v", path, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, p); err != nil {
			return fmt.Errorf("skeleton %s: %v", path, err)
		}
		out = append(out, file{filepath.FromSlash(rel), b.Bytes()})
		return nil
	})
	return out, err
}

// sdkVersion is the SDK version this binary was built with: what a new
// project should require to speak the same ABI as this tool.
func sdkVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == sdkModule && m.Version != "" && m.Version != "(devel)" {
				return m.Version
			}
		}
	}
	return "v0.1.0"
}

// goModTidy runs `go mod tidy` in dir, outside any workspace.
func goModTidy(dir string) error {
	cmd := exec.Command("go", "mod", "tidy")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
