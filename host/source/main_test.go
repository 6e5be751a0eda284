//go:build !nocontrolplane

// Left out with -tags nocontrolplane, for fuzzing (see fuzz_test.go).

package source

import (
	"os"
	"testing"

	"github.com/wasmsched/wasmsched/internal/controlplane"
)

func TestMain(m *testing.M) {
	controlplane.QuietLogs()
	os.Exit(m.Run())
}
