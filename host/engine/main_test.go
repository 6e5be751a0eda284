package engine_test

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// Keep compiled test guests out of the user's cache directory.
	dir, err := os.MkdirTemp("", "wasmsched-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv("WASMSCHED_CACHE_DIR", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
