package replicacmd_test

import (
	"testing"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// TestMain lets the tests re-run this binary as coffer itself
// (clitest.Main).
func TestMain(m *testing.M) { clitest.Main(m) }
