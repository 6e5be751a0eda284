package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/host/source"
)

// defaultNamespace is where the manifests install the scheduler.
const defaultNamespace = "wasmsched-system"

// moduleFlags are the flags pack and push share.
type moduleFlags struct {
	name      *string
	namespace *string
}

func addModuleFlags(fs *flag.FlagSet) moduleFlags {
	return moduleFlags{
		name:      fs.String("name", "", "policy name, as in the scheduler configuration (default: the file name without .wasm)"),
		namespace: fs.String("namespace", defaultNamespace, "the scheduler's namespace"),
	}
}

// parseModuleArgs parses flags given before or after the one module path
// and packs the module.
func parseModuleArgs(fs *flag.FlagSet, args []string, mf moduleFlags) (path string, module []byte, cms []*v1.ConfigMap, err error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", nil, nil, flag.ErrHelp
			}
			return "", nil, nil, errUsage
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch len(pos) {
	case 0:
		return "", nil, nil, errors.New("no module given")
	case 1:
	default:
		return "", nil, nil, fmt.Errorf("unexpected argument %q (one module at a time)", pos[1])
	}
	path = pos[0]
	name := *mf.name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		name = strings.TrimSuffix(name, ".tinygo")
	}
	module, err = os.ReadFile(path)
	if err != nil {
		return "", nil, nil, err
	}
	cms, err = source.Pack(name, *mf.namespace, module)
	if err != nil {
		return "", nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return path, module, cms, nil
}

func runPack(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pack", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: wasmsched pack P.wasm [--name N] [--namespace NS] [-o yaml|json]\n\n"+
			"Prints the ConfigMaps that deliver the module. Apply them with\n"+
			"  kubectl apply --server-side -f -\n"+
			"(client-side apply cannot store chunks this big in its annotation).\n\n")
		fs.PrintDefaults()
	}
	mf := addModuleFlags(fs)
	output := fs.String("o", "yaml", "output format: yaml (a multi-document stream) or json (a List)")
	_, module, cms, err := parseModuleArgs(fs, args, mf)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	switch *output {
	case "yaml":
		fmt.Fprintf(stdout, "# wasmsched policy %s: sha256 %s, %d bytes in %d ConfigMap(s).\n# Apply with: kubectl apply --server-side -f -\n",
			cms[0].Labels[source.LabelPolicy], source.Digest(module), len(module), len(cms))
		for i, cm := range cms {
			b, err := yaml.Marshal(cm)
			if err != nil {
				return err
			}
			if i > 0 {
				fmt.Fprintln(stdout, "---")
			}
			if _, err := stdout.Write(b); err != nil {
				return err
			}
		}
		return nil
	case "json":
		list := struct {
			APIVersion string          `json:"apiVersion"`
			Kind       string          `json:"kind"`
			Items      []*v1.ConfigMap `json:"items"`
		}{"v1", "List", cms}
		return writeJSON(stdout, list)
	default:
		return fmt.Errorf("unknown output format %q (want yaml or json)", *output)
	}
}
