// Package guide runs the Go code and the commands of guest/README.md, the
// policy author's guide: its policies are built as modules, its tests run,
// and its `wasmsched eval` commands print what it shows. These tests need
// the go command, cmd/wasmsched and the host, which the guest module must
// not depend on, so they live here, in the scheduler's module; the
// guide's own policy runs as a Go example in guest/example_test.go.
//
// The package holds tests only.
package guide
