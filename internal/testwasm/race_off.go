//go:build !race

package testwasm

// Race: see race_on.go.
const Race = false
