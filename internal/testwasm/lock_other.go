//go:build !unix

package testwasm

import "os"

// lockFile does nothing where flock is missing (wasip1, when vetting the
// guests' tests): those builds never run the tests that need it.
func lockFile(*os.File) error { return nil }
