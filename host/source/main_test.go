//go:build !nocontrolplane

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
