package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// Every hostile guest (docs/hostile-guests.md) makes `wasmsched eval` exit
// non-zero with one line on stderr naming the policy, its version, the call
// and the failure; the report still shows the nodes concerned. Guests that
// only meet the sandbox's limits (WASI refused, a huge reason cut) are not
// failures.
func TestEvalHostileGuests(t *testing.T) {
	pod, nodes := testdata(t, "pod.yaml"), testdata(t, "nodes.yaml")
	dir := t.TempDir()
	probe := filepath.Join(dir, "probe.wasm")
	if err := os.WriteFile(probe, testwasm.Bytes(t, "test/guests/probe"), 0o644); err != nil {
		t.Fatal(err)
	}
	engineGuest := func(name string) string {
		return filepath.Join(testwasm.Root(t), "host", "engine", "testdata", name+".wasm")
	}
	const id = `policy probe@[0-9a-f]{12}: `
	for _, tc := range []struct {
		name     string
		settings string   // probe settings; empty with module set
		module   string   // a module other than the probe
		flags    []string // more eval flags
		want     string   // regexp for the single stderr line, after "wasmsched eval: "
	}{
		{name: "panic in prefilter", settings: `{"at": "prefilter", "how": "panic"}`, want: id + `cycle: wasm error: unreachable: panic: probe: deliberate panic in prefilter`},
		{name: "panic in filter", settings: `{"at": "filter", "how": "panic"}`, want: id + `filter: wasm error: unreachable: panic: probe: deliberate panic in filter \(and 2 more policy failures\)`},
		{name: "panic in score", settings: `{"at": "score", "how": "panic"}`, want: id + `score: wasm error: unreachable: panic: probe: deliberate panic in score`},
		{name: "panic in normalize", settings: `{"at": "normalize", "how": "panic"}`, want: id + `normalize_score: wasm error: unreachable: panic: probe: deliberate panic in normalize`},
		{name: "panic in postfilter", settings: `{"at": "postfilter", "how": "panic"}`, want: id + `post_filter: wasm error: unreachable: panic: probe: deliberate panic in postfilter`},
		{name: "panic in reserve", settings: `{"at": "reserve", "how": "panic"}`, want: id + `reserve: wasm error: unreachable: panic: probe: deliberate panic in reserve`},
		{name: "panic in permit", settings: `{"at": "permit", "how": "panic"}`, want: id + `permit: wasm error: unreachable: panic: probe: deliberate panic in permit`},
		{name: "panic in unreserve", settings: `{"at": "unreserve", "how": "panic"}`, want: id + `unreserve: wasm error: unreachable: panic: probe: deliberate panic in unreserve`},
		{name: "panic in prebind", settings: `{"at": "prebind", "how": "panic"}`, want: id + `pre_bind: wasm error: unreachable: panic: probe: deliberate panic in prebind`},
		{name: "panic in postbind", settings: `{"at": "postbind", "how": "panic"}`, want: id + `post_bind: wasm error: unreachable: panic: probe: deliberate panic in postbind`},
		{name: "panic in settings", settings: `{"at": "settings", "how": "panic"}`, want: id + `init: wasm error: unreachable: panic: probe: deliberate panic in settings`},
		{name: "loop in filter", settings: `{"at": "filter", "how": "loop"}`, flags: []string{"--timeout", "50ms"}, want: id + `filter: deadline of 50ms exceeded(?: \(stopped after \d+ms\))? \(and 2 more policy failures\)`},
		{name: "loop in score", settings: `{"at": "score", "how": "loop"}`, flags: []string{"--timeout", "50ms"}, want: id + `score: deadline of 50ms exceeded(?: \(stopped after \d+ms\))?`},
		{name: "loop in settings", settings: `{"at": "settings", "how": "loop"}`, flags: []string{"--init-timeout", "300ms"}, want: id + `init: deadline of 300ms exceeded(?: \(stopped after \d+ms\))?`},
		{name: "loop in _initialize", module: engineGuest("init_loop"), flags: []string{"--init-timeout", "300ms"}, want: `policy init_loop@[0-9a-f]{12}: _initialize: deadline of 300ms exceeded(?: \(stopped after \d+ms\))?`},
		{name: "sleep in filter", settings: `{"at": "filter", "how": "sleep"}`, flags: []string{"--timeout", "50ms"}, want: id + `filter: deadline of 50ms exceeded(?: \(stopped after \d+ms\))? \(and 2 more policy failures\)`},
		{name: "bulk copies in filter", settings: `{"at": "filter", "how": "bulkcopy"}`, flags: []string{"--timeout", "50ms"}, want: id + `filter: deadline of 50ms exceeded(?: \(stopped after \d+ms\))? \(and 2 more policy failures\)`},
		{name: "stderr flood in filter", settings: `{"at": "filter", "how": "stderrflood"}`, flags: []string{"--timeout", "50ms"}, want: id + `filter: deadline of 50ms exceeded(?: \(stopped after \d+ms\))? \(and 2 more policy failures\)`},
		{name: "endless recursion in filter", settings: `{"at": "filter", "how": "recurse"}`, flags: []string{"--timeout", "20s"}, want: id + `filter: stack overflow: the call stack went past its limit of 16384 KiB \(and 2 more policy failures\)`},
		{name: "endless recursion at 8Mi", settings: `{"at": "filter", "how": "recurse"}`, flags: []string{"--memory-limit", "8Mi", "--timeout", "20s"}, want: id + `filter: stack overflow: the call stack went past its limit of 512 KiB \(and 2 more policy failures\)`},
		{name: "instrumentation's global", module: engineGuest("filter_escape"), want: `policy filter_escape@[0-9a-f]{12}: not a valid WebAssembly module: code section: function 6: opcode 0x24 at offset 7: global index 1 out of range \(1 globals\)`},
		{name: "endless recursion without loops", module: engineGuest("filter_stack"), flags: []string{"--timeout", "20s"}, want: `policy filter_stack@[0-9a-f]{12}: filter: stack overflow: the call stack went past its limit of 16384 KiB \(and 2 more policy failures\)`},
		{name: "memory in filter", settings: `{"at": "filter", "how": "grow"}`, flags: []string{"--memory-limit", "32Mi", "--timeout", "5s"},
			want: id + `filter: wasm error: unreachable: fatal error: out of memory \(linear memory \d+ bytes, limit 29360128 of memoryLimit 33554432: the memory limit was reached\) \(and 2 more policy failures\)`},
		{name: "memory in settings", settings: `{"at": "settings", "how": "grow"}`, flags: []string{"--memory-limit", "32Mi"},
			want: id + `init: wasm error: unreachable: fatal error: out of memory \(linear memory \d+ bytes, limit 29360128 of memoryLimit 33554432: the memory limit was reached\)`},
		{name: "status code 0", settings: `{"at": "filter", "how": "zero"}`, want: id + `filter: returned status code 0, which is not a valid code \(and 2 more policy failures\)`},
		{name: "status code 99", settings: `{"at": "permit", "how": "code99"}`, want: id + `permit: returned status code 99, which is not a valid code`},
		{name: "score over int32", settings: `{"at": "score", "how": "bigscore"}`, want: id + `score: policy reported an error: score 1099511627776 does not fit in an int32`},
		{name: "score over 100", settings: `{"at": "score", "how": "outofrange"}`, want: id + `score: 1000 for node k8s-node\d is outside 0..100`},
		{name: "result over 64 MiB", settings: `{"at": "filter", "how": "bigresult"}`, flags: []string{"--timeout", "5s"}, want: id + `filter: result of 68157702 bytes exceeds the 67108864 byte limit \(and 2 more policy failures\)`},
		{name: "trap in _initialize", module: engineGuest("init_trap"), want: `policy init_trap@[0-9a-f]{12}: _initialize: wasm error: unreachable`},
		{name: "missing export", module: engineGuest("no_score"), want: `policy no_score@[0-9a-f]{12}: does not export wasmsched_score: is it built with the wasmsched guest SDK as a reactor \(-buildmode=c-shared\)\?`},
		{name: "unknown import", module: engineGuest("env_import"), want: `policy env_import@[0-9a-f]{12}: imports env.foo, which the sandbox does not provide \(allowed: wasi_snapshot_preview1.\*, wasmsched.log\)`},
		{name: "wrong ABI version", module: engineGuest("abi_v2"), want: `policy abi_v2@[0-9a-f]{12}: abi_version: module speaks ABI version 2, this scheduler speaks ABI version 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"eval"}
			if tc.module != "" {
				args = append(args, "--policy", tc.module)
			} else {
				settings := filepath.Join(t.TempDir(), "settings.json")
				if err := os.WriteFile(settings, []byte(tc.settings), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--policy", probe, "--config", settings)
			}
			args = append(append(args, "--pod", pod, "--nodes", nodes), tc.flags...)
			code, out, errs := runCLI(args...)
			if code != 1 {
				t.Fatalf("exit %d, want 1; stdout %q; stderr %q", code, out, errs)
			}
			lines := strings.Split(strings.TrimRight(errs, "\n"), "\n")
			if want := "^wasmsched eval: " + tc.want + "$"; len(lines) != 1 || !regexp.MustCompile(want).MatchString(lines[0]) {
				t.Fatalf("stderr %q, want one line matching %s", errs, want)
			}
			if strings.Contains(errs, "goroutine ") {
				t.Fatalf("stderr has a Go trace: %s", errs)
			}
		})
	}

	// Not failures: the sandbox refuses WASI files, environment and
	// sockets, and the host cuts a 4 MiB reason; exit 0.
	for _, tc := range []struct{ name, settings, want string }{
		{"wasi", `{"at": "filter", "how": "wasi"}`, "probe: wasi: open /etc/passwd: denied; open .: denied; open /: denied; write /tmp/probe: denied; environ: empty; args: none; socket fd 3: denied; socket fd 4: denied; socket fd 5: denied"},
		{"huge reason", `{"at": "filter", "how": "hugereason"}`, "xxx... (4193292 bytes cut)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			settings := filepath.Join(t.TempDir(), "settings.json")
			if err := os.WriteFile(settings, []byte(tc.settings), 0o644); err != nil {
				t.Fatal(err)
			}
			// A generous deadline: building a 4 MiB reason is slow on a
			// loaded machine, and this case is about its size.
			code, out, errs := runCLI("eval", "--policy", probe, "--config", settings, "--pod", pod, "--nodes", nodes, "--timeout", "5s")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if !strings.Contains(out, tc.want) {
				t.Fatalf("output lacks %q:\n%.2000s", tc.want, out)
			}
		})
	}

	// -o json lists the failures too; under failurePolicy Fail the
	// verdict is the plugin's: Unschedulable, naming the policy.
	settings := filepath.Join(dir, "panic.json")
	os.WriteFile(settings, []byte(`{"at": "permit", "how": "panic"}`), 0o644)
	code, out, _ := runCLI("eval", "--policy", probe, "--config", settings, "--pod", pod, "--nodes", nodes, "-o", "json")
	if code != 1 || !regexp.MustCompile(`"permit":\{"code":"Unschedulable","reasons":\["probe: policy failed \(failurePolicy Fail\): policy probe@[0-9a-f]{12}: permit: [^"]*"\]\},"selected":"k8s-node\d","failures":\["policy probe@[0-9a-f]{12}: permit: wasm error: unreachable: panic: probe: deliberate panic in permit"\]\}`).MatchString(out) {
		t.Fatalf("exit %d, output %s", code, out)
	}
}

// Endless recursion is a stack overflow, reported as such, in a Go guest
// (the host's limit on the wasm call stack) and in a TinyGo guest (its own
// stack, first in linear memory, runs out: an access below address 0). The
// TinyGo case runs where the toolchain is installed (`make test-tinygo`), in
// parallel with the other TinyGo tests.
func TestEvalStackOverflow(t *testing.T) {
	t.Parallel()
	pod, nodes := testdata(t, "pod.yaml"), testdata(t, "nodes.yaml")
	for _, tc := range []struct{ name, want string }{
		{"Go", `^wasmsched eval: policy \S+@[0-9a-f]{12}: filter: stack overflow: the call stack went past its limit of 512 KiB \(and 2 more policy failures\)$`},
		{"TinyGo", `^wasmsched eval: policy \S+@[0-9a-f]{12}: filter: stack overflow: the guest's own stack in linear memory ran out \(wasm error: out of bounds memory access\) \(and 2 more policy failures\)$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			module := testwasm.Path(t, "test/guests/recurse")
			if tc.name == "TinyGo" {
				module = testwasm.TinyGoPath(t, "test/guests/recurse")
			}
			code, _, errs := runCLI("eval", "--policy", module, "--pod", pod, "--nodes", nodes, "--memory-limit", "8Mi", "--timeout", "10s")
			if code != 1 || !regexp.MustCompile(tc.want).MatchString(strings.TrimSpace(errs)) {
				t.Fatalf("exit %d, stderr %q; want exit 1 and %s", code, errs, tc.want)
			}
		})
	}
}
