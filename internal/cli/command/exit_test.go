package command

import (
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
)

// TestEveryClassHasAnExitCode: an error class without an exit code would
// end as a plain failure, whatever docs/11-troubleshooting.md promises.
func TestEveryClassHasAnExitCode(t *testing.T) {
	for _, c := range api.Classes {
		if _, ok := ExitCodes[c]; !ok {
			t.Errorf("class %s has no exit code", c)
		}
	}
	if len(ExitCodes) != len(api.Classes) {
		t.Errorf("%d exit codes for %d classes", len(ExitCodes), len(api.Classes))
	}
}
