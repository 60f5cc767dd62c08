// Package repocmd holds the commands on a repository as a whole: init,
// key, snapshots, verify (and verify boot), forget, gc, stats, locks,
// protect, repair, copy and catalog.
package repocmd

import (
	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/cli/command"
)

// app is the shared command.App, on which this package's commands are
// built.
type app struct{ *command.App }

// Commands are the repocmd commands, for the root of the tree.
func Commands(shared *command.App) []*cobra.Command {
	a := &app{shared}
	return []*cobra.Command{a.cmdInit(), a.cmdSnapshots(), a.cmdKey(), a.cmdVerify(), a.cmdForget(), a.cmdGC(), a.cmdStats(),
		a.cmdLocks(), a.cmdProtect(), a.cmdRepair(), a.cmdCopy(), a.cmdCatalog()}
}
