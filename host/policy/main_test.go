package policy

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// Compile each test module once per run, not once per Load.
	dir, err := os.MkdirTemp("", "wasmsched-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv("WASMSCHED_CACHE_DIR", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
