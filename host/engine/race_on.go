//go:build race

package engine

// raceSlowdown stretches the default compile limits in binaries built with
// the race detector (tests, the end-to-end scheduler): wazero's compiler,
// instrumented, takes over a minute and several times the memory for a 4 MB
// Go guest. Production builds are not race builds.
const raceSlowdown = 20
