package testwasm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// namedTB is t under another test's name.
type namedTB struct {
	testing.TB
	name string
}

func (n namedTB) Name() string { return n.name }

func TestClaim(t *testing.T) {
	t.Setenv(EnvClaims, "")
	Claim(namedTB{t, "TestUnshared"}) // no claims directory: runs, claims nothing

	dir := t.TempDir()
	t.Setenv(EnvClaims, dir)
	claim := func(name string) (ran, skipped bool) {
		t.Run(name, func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			Claim(namedTB{t, name + "/sub"})
			ran = true
		})
		return ran, skipped
	}
	if ran, _ := claim("TestFirst"); !ran {
		t.Fatal("an unclaimed test was skipped")
	}
	if ran, _ := claim("TestFirst"); !ran {
		t.Fatal("a test this process claimed was skipped the second time")
	}
	files, err := os.ReadDir(dir)
	if err != nil || len(files) != 1 || !strings.HasSuffix(files[0].Name(), "-TestFirst") {
		t.Fatalf("claims directory holds %v (%v), want one claim for TestFirst", files, err)
	}
	// Another process claimed TestOther: this one skips it.
	other := strings.TrimSuffix(files[0].Name(), "TestFirst") + "TestOther"
	if err := os.WriteFile(filepath.Join(dir, other), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ran, skipped := claim("TestOther"); ran || !skipped {
		t.Fatalf("a test another process claimed: ran %v, skipped %v; want it skipped", ran, skipped)
	}
}

func TestSharedDir(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvClaims, dir)
	if got := SharedDir(t); got != dir {
		t.Errorf("SharedDir = %s, want the claims directory %s", got, dir)
	}
	unlock := Lock(t, filepath.Join(dir, "lock"))
	unlock()
}
