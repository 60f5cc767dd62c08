// Package workercmd holds the commands of the fleet's workers: `coffer
// workers` (the registry: list, drain) and `coffer worker` (run a worker
// on this host).
package workercmd

import (
	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/cli/command"
)

// app is the shared command.App, on which this package's commands are
// built.
type app struct{ *command.App }

// Commands are the workercmd commands, for the root of the tree.
func Commands(shared *command.App) []*cobra.Command {
	a := &app{shared}
	return []*cobra.Command{a.cmdWorkers(), a.cmdWorker()}
}
