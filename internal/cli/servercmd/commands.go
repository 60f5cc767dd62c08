// Package servercmd holds the server and who may use it: server, user,
// token, acl, audit and account. They share the first-run setup link (setupText).
package servercmd

import (
	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/cli/command"
)

// app is the shared command.App, on which this package's commands are
// built.
type app struct{ *command.App }

// Commands are the servercmd commands, for the root of the tree.
func Commands(shared *command.App) []*cobra.Command {
	a := &app{shared}
	return []*cobra.Command{a.cmdServer(), a.cmdUser(), a.cmdToken(), a.cmdACL(), a.cmdAudit(), a.cmdAccount()}
}
