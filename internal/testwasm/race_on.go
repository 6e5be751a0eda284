//go:build race

package testwasm

// Race tells whether the test binary is built with the race detector.
const Race = true
