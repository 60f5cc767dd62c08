// Package configcmd holds the commands on the configuration: config
// (settings, the objects kept in the catalog, test sends) and policy
// (check, preview), which reads drafts like config create.
package configcmd

import (
	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/cli/command"
)

// app is the shared command.App, on which this package's commands are
// built.
type app struct{ *command.App }

// Commands are the configcmd commands, for the root of the tree.
func Commands(shared *command.App) []*cobra.Command {
	a := &app{shared}
	return []*cobra.Command{a.cmdConfig(), a.cmdPolicy()}
}
