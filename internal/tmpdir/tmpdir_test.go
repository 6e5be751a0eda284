package tmpdir

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestSweep: a directory whose owner ended is removed; those of a running
// process (this one, or one whose id matches but started at another time
// is not), of another PID namespace, without an owner file or with a
// damaged one are kept.
func TestSweep(t *testing.T) {
	me, ok := self()
	if !ok {
		t.Skip("no /proc: Sweep removes nothing here")
	}
	// A process that ran and ended: its id with its real start time.
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	start, ok := startTime(pid)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatal("could not read the start time of a child process")
	}
	gone := owner{pid: pid, start: start, ns: me.ns}
	if gone.running() {
		t.Fatalf("process %d still counts as running after it ended", pid)
	}
	parent := t.TempDir()
	mkdir := func(name, owner string) string {
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	ended := mkdir("p-ended", gone.String())
	reused := mkdir("p-reused", owner{pid: me.pid, start: "1", ns: me.ns}.String())
	mine := mkdir("p-mine", me.String())
	other := mkdir("p-otherns", owner{pid: pid, start: start, ns: "pid:[1]"}.String())
	unowned := mkdir("p-unowned", "")
	damaged := mkdir("p-damaged", "not an owner")
	elsewhere := mkdir("q-ended", gone.String())

	removed := Sweep(parent, "p-")
	if !slices.Equal(removed, []string{ended}) {
		t.Errorf("Sweep removed %q, want only %q", removed, ended)
	}
	for _, dir := range []string{reused, mine, other, unowned, damaged, elsewhere} {
		if _, err := os.Stat(filepath.Join(dir, "data")); err != nil {
			t.Errorf("%s: %v", filepath.Base(dir), err)
		}
	}
	if _, err := os.Stat(ended); !os.IsNotExist(err) {
		t.Errorf("%s still exists (%v)", ended, err)
	}
}

// TestMake: the directory is made with this process as its owner, and
// making one sweeps what an ended process left with the same prefix.
func TestMake(t *testing.T) {
	if _, ok := self(); !ok {
		t.Skip("no /proc")
	}
	t.Setenv("TMPDIR", t.TempDir())
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start, _ := startTime(cmd.Process.Pid)
	_ = cmd.Wait()
	me, _ := self()
	left := filepath.Join(os.TempDir(), "wasmsched-x-left")
	if err := os.Mkdir(left, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, ownerFile), []byte(owner{pid: cmd.Process.Pid, start: start, ns: me.ns}.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	dir, err := Make("wasmsched-x-")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := parseOwner(string(b)); !ok || o != me {
		t.Errorf("owner file %q, want %q", b, me.String())
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("the ended process's directory is still there (%v)", err)
	}
	// Another Make keeps the first: its owner runs.
	if _, err := Make("wasmsched-x-"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("a running process's directory was swept: %v", err)
	}
}
