package engine

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/wasmsched/wasmsched/host/interrupt"
)

// Compiling a module is the one step whose cost the module chooses before
// any deadline applies: wazero's compile time and memory grow faster than
// linearly with some constructs (br_table targets times block nesting,
// millions of functions), and a compile cannot be interrupted. The
// structural limits of package interrupt refuse the known cases at once;
// what they miss is bounded here. The module is compiled first in a child
// process (this same executable, which handles the request in its init, see
// the end of this file) that writes the result into the compilation cache
// on disk; the child is killed when it runs longer than
// Config.CompileTimeout, when its resident memory passes
// Config.CompileMemory, or when the caller's context ends (a newer upload
// superseding this one). Only a module whose compilation fitted is compiled
// in the process, which then loads the child's result from the cache (a
// compile that fitted in the child fits here too, should the cache have
// lost it).
//
// Isolation needs a compilation cache on disk (DefaultCache, or
// Config.CacheDir): with an in-memory cache the compile runs in the process,
// bounded by the structural limits only.

// Defaults of Config.CompileTimeout and Config.CompileMemory: a 4 MB Go
// guest compiles in about a second here, with a peak of about 200 MB.
const (
	DefaultCompileTimeout = 60 * time.Second
	DefaultCompileMemory  = 1 << 30
)

// The environment of a compiler child.
const (
	compilerEnv      = "WASMSCHED_COMPILER"
	compilerDirEnv   = "WASMSCHED_COMPILER_CACHE"
	compilerPagesEnv = "WASMSCHED_COMPILER_PAGES"
	compilerMemEnv   = "WASMSCHED_COMPILER_MEMORY"
)

// compilerExeEnv, where set, names the program compileInChild runs in
// place of this one: any binary that links this package compiles, since
// the child's work happens in its init. make test sets it for its race
// set to a plain build of this package's tests, so that the guests those
// tests load compile at full speed rather than race-instrumented (about
// eight times the CPU; wazero generates the same code either way).
const compilerExeEnv = "WASMSCHED_COMPILER_EXE"

// runtimeConfig is the configuration of every runtime that compiles or runs
// policies; the compiler child must use the same, or the cache would not
// match.
func runtimeConfig(pages uint32) wazero.RuntimeConfig {
	return wazero.NewRuntimeConfigCompiler().
		WithMemoryLimitPages(pages).
		WithDebugInfoEnabled(false)
}

// verified remembers what compiled in a child in this process (by sha256 of
// the instrumented bytes and the page limit), so that a second profile or a
// rollback does not start another child.
var verified sync.Map

// compileInChild compiles bin (already instrumented) in a child process into
// the compilation cache in dir, within the limits of cfg.
func compileInChild(ctx context.Context, bin []byte, pages uint32, dir string, cfg Config) error {
	key := fmt.Sprintf("%x/%d", sha256.Sum256(bin), pages)
	if _, ok := verified.Load(key); ok {
		return nil
	}
	exe := os.Getenv(compilerExeEnv)
	if exe == "" {
		exe = "/proc/self/exe" // still this program, even if its file was replaced
		if _, err := os.Stat(exe); err != nil {
			if exe, err = os.Executable(); err != nil {
				return fmt.Errorf("cannot start the compiler: %v", err)
			}
		}
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(),
		compilerEnv+"=1",
		compilerDirEnv+"="+dir,
		compilerPagesEnv+"="+strconv.FormatUint(uint64(pages), 10),
		compilerMemEnv+"="+strconv.FormatUint(cfg.CompileMemory, 10))
	cmd.Stdin = bytes.NewReader(bin)
	out := &headBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot start the compiler: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(cfg.CompileTimeout)
	defer timer.Stop()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	tooCostly := fmt.Errorf("compiling needed more than %d MiB of memory, the limit: a module this costly to compile is refused", cfg.CompileMemory>>20)
	stop := func(why error) error {
		_ = cmd.Process.Kill()
		<-done
		return why
	}
	for {
		select {
		case err := <-done:
			if err != nil {
				msg := strings.TrimSpace(out.String())
				if msg == "" {
					msg = err.Error()
				}
				if strings.Contains(msg, "out of memory") {
					return tooCostly
				}
				return errors.New(firstLine(msg))
			}
			verified.Store(key, struct{}{})
			return nil
		case <-timer.C:
			return stop(fmt.Errorf("compiling took longer than %v, the limit: a module this costly to compile is refused", cfg.CompileTimeout))
		case <-ctx.Done():
			return stop(fmt.Errorf("compile abandoned after %v: %w", time.Since(start).Round(time.Millisecond), ctx.Err()))
		case <-poll.C:
			if residentBytes(cmd.Process.Pid) > cfg.CompileMemory {
				return stop(tooCostly)
			}
		}
	}
}

// residentBytes is a process's resident memory (VmRSS in /proc), 0 where
// it cannot be read.
func residentBytes(pid int) uint64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// firstLine is what explains a failed child: its "fatal error:" line if
// the Go runtime gave up, else the first line it printed.
func firstLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "fatal error:") {
			return l
		}
	}
	return lines[0]
}

// headBuffer keeps the first max bytes written to it, where the compiler
// child prints why it failed (Go's "fatal error:" comes before its goroutine
// dump); it is safe for concurrent use.
type headBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.b = append(h.b, p[:min(len(p), h.max-len(h.b))]...)
	return len(p), nil
}

func (h *headBuffer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return string(h.b)
}

func init() {
	if os.Getenv(compilerEnv) == "1" {
		os.Exit(runCompiler())
	}
}

// runCompiler is the compiler child: it compiles the module on its stdin
// into the cache directory and exits 0, or prints why not and exits 1.
func runCompiler() int {
	dir := os.Getenv(compilerDirEnv)
	pages, _ := strconv.ParseUint(os.Getenv(compilerPagesEnv), 10, 32)
	if limit, err := strconv.ParseInt(os.Getenv(compilerMemEnv), 10, 64); err == nil && limit > 0 {
		// Collect hard before the parent's limit kills the process.
		debug.SetMemoryLimit(limit * 3 / 4)
	}
	bin, err := io.ReadAll(io.LimitReader(os.Stdin, 2*interrupt.MaxModuleBytes))
	if err != nil {
		fmt.Fprintf(os.Stderr, "reading the module: %v\n", err)
		return 1
	}
	cache, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "compilation cache %s: %v\n", dir, err)
		return 1
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, runtimeConfig(uint32(pages)).WithCompilationCache(cache))
	if _, err := compileModule(ctx, r, bin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
