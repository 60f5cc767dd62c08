// Package backupcmd holds the commands that make backup points: backup
// (disk, vm), run (a policy's job now) and bench.
package backupcmd

import (
	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/cli/command"
)

// app is the shared command.App, on which this package's commands are
// built.
type app struct{ *command.App }

// Commands are the backupcmd commands, for the root of the tree.
func Commands(shared *command.App) []*cobra.Command {
	a := &app{shared}
	return []*cobra.Command{a.cmdBackup(), a.cmdRun(), a.cmdBench()}
}
