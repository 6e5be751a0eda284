// Command kubemodgen writes the module files of the Kubernetes minors the
// tree builds for besides go.mod's (make k8s-mods): for each argument
// MINOR=VERSION (1.36=v1.36.4), or with none for every k8s/*.mod at the
// version it has, it derives k8s/<minor>.mod from go.mod, tidies it with
// go.sum as its starting k8s/<minor>.sum, and checks that every package of
// the tree resolves with the minor's build tag. It needs the module proxy.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/wasmsched/wasmsched/internal/kubemod"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kubemodgen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	want := map[string]string{}
	for _, a := range args {
		minor, version, ok := strings.Cut(a, "=")
		if !ok || kubemod.MinorOf(version) != minor {
			return fmt.Errorf("argument %q: want MINOR=VERSION, such as 1.36=v1.36.4", a)
		}
		want[minor] = version
	}
	if len(args) == 0 {
		minors, err := kubemod.Minors(root)
		if err != nil {
			return err
		}
		for _, m := range minors[1:] {
			want[m.Minor] = m.Version
		}
	}
	main, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return err
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		return err
	}
	for minor, version := range want {
		if err := generate(root, main, sum, minor, version); err != nil {
			return fmt.Errorf("Kubernetes %s: %w", minor, err)
		}
	}
	return nil
}

func generate(root string, main, sum []byte, minor, version string) error {
	out, err := goCmd(root, "mod", "download", "-json", kubemod.Kubernetes+"@"+version)
	if err != nil {
		return err
	}
	var dl struct{ GoMod, Error string }
	if err := json.Unmarshal(out, &dl); err != nil {
		return err
	}
	if dl.Error != "" {
		return fmt.Errorf("download %s@%s: %s", kubemod.Kubernetes, version, dl.Error)
	}
	upMod, err := os.ReadFile(dl.GoMod)
	if err != nil {
		return err
	}
	up, err := kubemod.ReadUpstream(upMod)
	if err != nil {
		return err
	}
	derived, err := kubemod.Derive(main, version, up)
	if err != nil {
		return err
	}
	name := filepath.Join(kubemod.Dir, minor+".mod")
	path := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, derived, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(strings.TrimSuffix(path, ".mod")+".sum", sum, 0o644); err != nil {
		return err
	}
	// -e: tidy sees every file whatever its build tag, including the newer
	// minors' files, whose imports this minor may not have; the go list
	// below is the check, with this minor's tag.
	if _, err := goCmd(root, "mod", "tidy", "-e", "-modfile="+name); err != nil {
		return err
	}
	m := kubemod.Minor{Minor: minor}
	if _, err := goCmd(root, "list", "-modfile="+name, "-tags="+m.Tag(), "-deps", "-test", "./..."); err != nil {
		return fmt.Errorf("the tree does not resolve with %s: %w", name, err)
	}
	tidied, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if bad := kubemod.Check(main, tidied, name); len(bad) > 0 {
		return fmt.Errorf("%s", strings.Join(bad, "\n"))
	}
	fmt.Printf("%s: Kubernetes %s\n", name, version)
	return nil
}

// goCmd runs the go command outside the workspace (a minor's module file
// cannot be used in workspace mode) and returns its standard output.
func goCmd(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}
