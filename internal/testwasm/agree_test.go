package testwasm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type verdict struct {
	Node  string
	Score *int64
}

func TestDisagreement(t *testing.T) {
	score := func(v int64) *int64 { return &v }
	names := []string{"go", "tinygo"}
	same := []verdict{{"a", score(100)}, {"a", score(100)}}
	if msg := disagreement("examples/x", names, same); msg != "" {
		t.Errorf("equal results (through pointers) reported as %q", msg)
	}
	differ := []verdict{{"a", score(100)}, {"a", score(0)}}
	want := "the go and tinygo builds of examples/x disagree:\ngo: {\"Node\":\"a\",\"Score\":100}\ntinygo: {\"Node\":\"a\",\"Score\":0}"
	if msg := disagreement("examples/x", names, differ); msg != want {
		t.Errorf("got %q, want %q", msg, want)
	}
	if msg := disagreement("examples/x", names[:1], same[:1]); msg != "" {
		t.Errorf("one result (the other build skipped) reported as %q", msg)
	}
}

func TestUnversioned(t *testing.T) {
	err := errors.New(`policy gpu@544b4372ad8c: init: settings: json: unknown field "extra"`)
	if got, want := Unversioned(err), `policy gpu@<version>: init: settings: json: unknown field "extra"`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestTinyGoMissing(t *testing.T) {
	t.Setenv(EnvTinyGo, "/nonexistent/tinygo")
	t.Setenv(EnvRequireTinyGo, "")
	skipped := t.Run("skips", func(t *testing.T) { TinyGo(t) })
	if !skipped {
		t.Fatal("the subtest failed instead of skipping")
	}
	var msg string
	ft := &fakeTB{TB: t, fatal: &msg}
	t.Setenv(EnvRequireTinyGo, "1")
	func() {
		defer func() { _ = recover() }()
		TinyGo(ft)
	}()
	if !strings.Contains(msg, "/nonexistent/tinygo") || !strings.Contains(msg, "make tinygo") {
		t.Errorf("under %s=1: %q, want a failure naming the path and `make tinygo`", EnvRequireTinyGo, msg)
	}
}

// TestTinyGoOff: WASMSCHED_TINYGO=off skips a TinyGo build, saying so,
// also where the toolchain is installed, and fails it where TinyGo is
// required as well.
func TestTinyGoOff(t *testing.T) {
	t.Setenv(EnvTinyGo, TinyGoOff)
	for _, require := range []string{"", "1"} {
		t.Setenv(EnvRequireTinyGo, require)
		var fatal, skip string
		func() {
			defer func() { _ = recover() }()
			TinyGo(&fakeTB{TB: t, fatal: &fatal, skip: &skip})
		}()
		switch {
		case require == "" && (fatal != "" || !strings.Contains(skip, "TinyGo builds are off here (WASMSCHED_TINYGO=off)")):
			t.Errorf("off: skipped %q, failed %q; want a skip saying TinyGo builds are off", skip, fatal)
		case require == "1" && (skip != "" || !strings.Contains(fatal, "cannot be both off and required")):
			t.Errorf("off and required: skipped %q, failed %q; want a failure naming both", skip, fatal)
		}
	}
}

// TestTinyGoWanted: benchmarks include TinyGo where the toolchain is
// installed or required (TinyGo then fails on what is wrong), and leave it
// out where it is missing or off.
func TestTinyGoWanted(t *testing.T) {
	installed := filepath.Join(t.TempDir(), "tinygo")
	if err := os.WriteFile(installed, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bin, require string
		want         bool
	}{
		{installed, "", true},
		{"/nonexistent/tinygo", "", false},
		{"/nonexistent/tinygo", "1", true}, // TinyGo then fails, naming the path
		{TinyGoOff, "", false},
		{TinyGoOff, "1", true}, // TinyGo then fails: off and required
	} {
		t.Setenv(EnvTinyGo, c.bin)
		t.Setenv(EnvRequireTinyGo, c.require)
		if got := TinyGoWanted(t); got != c.want {
			t.Errorf("%s=%s %s=%q: TinyGoWanted %v, want %v", EnvTinyGo, c.bin, EnvRequireTinyGo, c.require, got, c.want)
		}
	}
}

// fakeTB records Fatalf and Skipf instead of failing or skipping.
type fakeTB struct {
	testing.TB
	fatal *string
	skip  *string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	*f.fatal = fmt.Sprintf(format, args...)
	panic("fatal")
}
func (f *fakeTB) Skipf(format string, args ...any) {
	if f.skip == nil {
		f.TB.Skipf(format, args...)
	}
	*f.skip = fmt.Sprintf(format, args...)
	panic("skip")
}
