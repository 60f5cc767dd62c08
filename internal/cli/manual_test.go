package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/cli/command"
)

// TestEveryCommandHasAManualPage walks every command, groups included,
// and fails when `coffer help COMMAND` would show a one-line help instead
// of a manual page: a description, what it prints, examples, exit status.
// (cobra's own help command is not coffer's; its completion command has
// coffer's manual pages, cmd_completion.go.)
func TestEveryCommandHasAManualPage(t *testing.T) {
	a := newApp(&command.App{})
	root := a.newRoot()
	n := 0
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		n++
		name := c.CommandPath()
		long := c.Long
		switch {
		case strings.TrimSpace(long) == "":
			t.Errorf("%s has no manual page (Long is empty)", name)
		case !strings.Contains(long, "\nEXAMPLES\n"):
			t.Errorf("%s: its manual page has no EXAMPLES section", name)
		case !strings.Contains(long, "\nEXIT STATUS\n"):
			t.Errorf("%s: its manual page has no EXIT STATUS section", name)
		case c.Runnable() && !strings.Contains(long, "\nOUTPUT\n"):
			t.Errorf("%s: its manual page does not say what it prints (OUTPUT)", name)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if n < 40 {
		t.Fatalf("walked only %d commands", n)
	}
}
