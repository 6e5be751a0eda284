// Command chartpack packages charts/wasmsched as helm package does (make
// chart), after linting it as helm lint does:
//
//	chartpack OUTDIR
//
// and prints the package's path.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/wasmsched/wasmsched/internal/chart"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: chartpack OUTDIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "chartpack:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return err
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if err := chart.Lint(root, "v1.37.0"); err != nil {
		return err
	}
	c, err := chart.Load(root)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	path, err := chartutil.Save(c, out)
	if err != nil {
		return err
	}
	fmt.Println(path)
	return nil
}
