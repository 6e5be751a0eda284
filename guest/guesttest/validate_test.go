package guesttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Objects the API server would refuse are refused here too, with the rule
// they break.
func TestCheckMetaAsAPIServer(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
		read            func(path string) error
	}{
		{"label value with a colon", "kind: Node\napiVersion: v1\nmetadata:\n  name: n1\n  labels:\n    pool: \"a:b\"\n",
			`Node "n1" would be refused by the API server: label pool value "a:b" must be empty, or at most 63 characters`, readNodesErr},
		{"label key prefix", "kind: Node\napiVersion: v1\nmetadata:\n  name: n1\n  labels:\n    Example.com/pool: a\n",
			`label key "Example.com/pool" must be a key whose prefix (before '/') is a lowercase DNS subdomain`, readNodesErr},
		{"pod name with capitals", "kind: Pod\napiVersion: v1\nmetadata:\n  name: Web\n",
			`Pod "Web" would be refused by the API server: metadata.name must be a lowercase RFC 1123 subdomain`, readPodsErr},
		{"namespace name with a dot", "kind: Namespace\napiVersion: v1\nmetadata:\n  name: team.a\n",
			`Namespace "team.a" would be refused by the API server: metadata.name must be a lowercase RFC 1123 label`, readObjectsErr},
		{"object label value too long", "kind: Namespace\napiVersion: v1\nmetadata:\n  name: team-a\n  labels:\n    exempt: " + strings.Repeat("x", 64) + "\n",
			`Namespace "team-a" would be refused by the API server: label exempt value`, readObjectsErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in.yaml")
			if err := os.WriteFile(path, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			err := tc.read(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	// Valid ones pass.
	for _, ok := range []string{"a", "example.com/pool", "kubernetes.io/hostname", "x_y.z-1"} {
		if why := checkQualifiedName(ok); why != "" {
			t.Errorf("key %q refused: %s", ok, why)
		}
	}
}

func readNodesErr(path string) error { _, err := readNodes(path); return err }
func readPodsErr(path string) error  { _, err := readPods(path); return err }
func readObjectsErr(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return MakeCluster().add(path, data)
}
