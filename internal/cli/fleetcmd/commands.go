// Package fleetcmd holds the commands on the fleet under protection and
// its jobs: vms (inventory, protection), jobs and job (follow, log,
// cancel), and plan (capacity, accuracy).
package fleetcmd

import (
	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/cli/command"
)

// app is the shared command.App, on which this package's commands are
// built.
type app struct{ *command.App }

// Commands are the fleetcmd commands, for the root of the tree.
func Commands(shared *command.App) []*cobra.Command {
	a := &app{shared}
	return []*cobra.Command{a.cmdJobs(), a.cmdJob(), a.cmdVMs(), a.cmdPlan()}
}
