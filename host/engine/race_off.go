//go:build !race

package engine

// raceSlowdown: see race_on.go.
const raceSlowdown = 1
