// Package tmpdir makes the temporary directories of wasmsched's own
// processes (test binaries, in-process control planes, demo schedulers)
// such that what a killed process left behind is removed by the next one.
//
// A process removes its directory when it ends normally. One killed (a test
// binary stopped at its -timeout, a demo interrupted twice, a CI job
// cancelled) cannot, and its directory, with a compiled kube-scheduler, a
// module cache or an etcd data directory in it, stays until someone
// removes it by hand: on a shared machine they fill the disk. Make
// therefore writes who owns the directory into it, and sweeps the
// directories of the same prefix whose owner is gone before it makes a new
// one.
package tmpdir

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ownerFile is the file in each directory Make makes that names the process
// that made it.
const ownerFile = ".wasmsched-owner"

// Make is os.MkdirTemp("", prefix) for a directory the calling process
// removes when it is done, with its owner recorded. It first removes every
// directory with the same prefix in the same parent that Make made for a
// process that has since ended (checked by process id, start time and PID
// namespace, so a reused process id or a process in another container
// sharing the directory keeps its directory). Directories Make did not make
// are never touched.
func Make(prefix string) (string, error) {
	me, ok := self()
	if ok {
		sweep(os.TempDir(), prefix, me)
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	if ok {
		if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(me.String()), 0o600); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// Sweep removes the directories parent/prefix* whose owner (as Make
// recorded it) has ended, and returns the ones it removed. Where the
// process table cannot be read (not Linux) it removes nothing.
func Sweep(parent, prefix string) []string {
	me, ok := self()
	if !ok {
		return nil
	}
	return sweep(parent, prefix, me)
}

// sweep is Sweep for the calling process me.
func sweep(parent, prefix string, me owner) []string {
	dirs, _ := filepath.Glob(filepath.Join(parent, prefix+"*"))
	var removed []string
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not made by Make, or being made
		}
		o, ok := parseOwner(string(b))
		if !ok || o.ns != me.ns || o.pid == me.pid || o.running() {
			continue
		}
		if os.RemoveAll(dir) == nil {
			removed = append(removed, dir)
		}
	}
	return removed
}

// owner identifies a process: its id, its start time (in clock ticks since
// boot, /proc/<pid>/stat's 22nd field) and its PID namespace.
type owner struct {
	pid   int
	start string
	ns    string
}

func (o owner) String() string { return fmt.Sprintf("%d %s %s\n", o.pid, o.start, o.ns) }

func parseOwner(s string) (owner, bool) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return owner{}, false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return owner{}, false
	}
	return owner{pid: pid, start: f[1], ns: f[2]}, true
}

// self returns the calling process as an owner; false where /proc does not
// tell (not Linux).
func self() (owner, bool) {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return owner{}, false
	}
	pid := os.Getpid()
	start, ok := startTime(pid)
	if !ok {
		return owner{}, false
	}
	return owner{pid: pid, start: start, ns: ns}, true
}

// running reports whether o's process still runs: a process with its id
// and its start time.
func (o owner) running() bool {
	start, ok := startTime(o.pid)
	return ok && start == o.start
}

// startTime returns the start time of process pid from /proc/<pid>/stat
// (field 22, counted after the command name, which may hold spaces).
func startTime(pid int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return "", false
	}
	return f[19], true
}
