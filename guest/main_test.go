package guest_test

import (
	"testing"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// TestMain gives the tests a compilation cache of their own: TestREADMEEval
// runs `wasmsched eval`, which would otherwise compile into the user's.
func TestMain(m *testing.M) { testwasm.Main(m) }
