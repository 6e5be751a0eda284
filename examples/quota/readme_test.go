//go:build !wasip1

package main

import (
	"testing"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// The README's wasmsched eval commands print exactly what it shows.
func TestREADME(t *testing.T) { testwasm.CheckREADMEEval(t, "README.md", "quota") }
