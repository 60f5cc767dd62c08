// Package reposervercmd holds `coffer repository`: the repository server
// that a storage host runs (serve), and its clients' credentials
// (credential add, remove, list).
package reposervercmd

import (
	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/cli/command"
)

// app is the shared command.App, on which this package's commands are
// built.
type app struct{ *command.App }

// Commands are the reposervercmd commands, for the root of the tree.
func Commands(shared *command.App) []*cobra.Command {
	a := &app{shared}
	cmd := &cobra.Command{
		Use:   "repository",
		Short: "serve a repository from a storage host to the servers and workers (a hardened repository)",
		Long: command.Manual(`A repository server runs on a storage host as its own unprivileged user and
serves one repository directory over HTTPS. Each server or worker of
coffer gets a credential of its own with one right: read (restores,
verify), append (backups: it writes new objects and holds leases, and
can neither overwrite nor delete anything else) or maintain (forget, gc,
repair, keys). Clients use the server's https:// URL as their repository,
with --repo-credential-file. A stolen append credential, or root on a
backup server, cannot delete the backups.`,
			"See the subcommands.", "coffer repository serve --dir /srv/coffer --credentials /etc/coffer/repository-credentials.yaml", "0."),
	}
	cmd.AddCommand(a.cmdServe(), a.cmdCredential())
	return []*cobra.Command{command.FaceOnly(cmd, "the repository server's own process and files, on the storage host")}
}
