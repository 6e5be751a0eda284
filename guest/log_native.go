//go:build !wasip1

package guest

import (
	"fmt"
	"os"
)

// hostLog prints to standard error when the SDK runs natively, in a policy's
// own unit tests.
func hostLog(level uint32, msg string) {
	fmt.Fprintf(os.Stderr, "policy log (level %d): %s\n", level, msg)
}
