// Package restorecmd holds the commands that get data back out of backup
// points: restore (a disk, a new VM), files, instant recovery and the
// storage snapshots a backup may leave behind.
package restorecmd

import (
	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/cli/command"
)

// app is the shared command.App, on which this package's commands are
// built.
type app struct{ *command.App }

// Commands are the restorecmd commands, for the root of the tree.
func Commands(shared *command.App) []*cobra.Command {
	a := &app{shared}
	return []*cobra.Command{a.cmdRestore(), a.cmdStorageSnapshots(), a.cmdFiles(), a.cmdInstant()}
}
