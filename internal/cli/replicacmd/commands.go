// Package replicacmd holds `coffer replicas`: the standbys replications
// keep on DR hosts (list, run, points).
package replicacmd

import (
	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/cli/command"
)

// app is the shared command.App, on which this package's commands are
// built.
type app struct{ *command.App }

// Commands are the replicacmd commands, for the root of the tree.
func Commands(shared *command.App) []*cobra.Command {
	a := &app{shared}
	return []*cobra.Command{a.cmdReplicas(), a.cmdFailover()}
}
