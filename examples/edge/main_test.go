package main

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// The wasm-level tests (eval_test.go) load the module many times:
	// compile it once per run, not once per load.
	dir, err := os.MkdirTemp("", "wasmsched-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv("WASMSCHED_CACHE_DIR", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
