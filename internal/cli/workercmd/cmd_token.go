package workercmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

// cmdWorkersToken is `coffer workers token`: the workers' own credentials.
func (a *app) cmdWorkersToken() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "manage the workers' own credentials to the catalog",
		Long: command.Manual(`Manage worker tokens: each worker's own credential to the servers' PostgreSQL
catalog, a login role coffer_worker_<name> that reaches the fleet's
queue, its own registry row, the jobs' logs and the configuration
objects, and nothing else (no users, tokens, ACL, audit log or sessions).
A stolen token is revoked with coffer workers token revoke.`,
			"See the subcommands.", "coffer workers token create kvm7 > kvm7.token", "That of the subcommand.")}
	cmd.AddCommand(a.cmdWorkersTokenCreate(), a.cmdWorkersTokenRevoke())
	return cmd
}

func (a *app) cmdWorkersTokenCreate() *cobra.Command {
	return command.RemoteToo(command.Op(&cobra.Command{Use: "create NAME", Short: "create a worker's token (shown once), or replace it",
		Long: command.Manual(`Create the token worker NAME logs in to the catalog with: a PostgreSQL role
coffer_worker_NAME whose password is the token's secret, member of the
role coffer_worker that holds the workers' grants (created at the first
token). A worker that had a token gets a new one: the old one stops
working for new connections. The catalog must be PostgreSQL, and the
servers' database role must be allowed to create roles (CREATEROLE). The
token is printed this once: store it in a file only the worker's user can
read, and give it to coffer worker --token-file.`,
			"The token on stdout (alone, for scripts), the role on stderr. --json: {worker, role, token}.",
			`coffer workers token create kvm7 > /etc/coffer/worker.token
coffer workers token create kvm7 --server https://backup.example:8443 > kvm7.token`,
			"0; 2 for a bad name or a SQLite catalog."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := command.RunOp[api.NewWorkerToken](cmd.Context(), a.App, "create-worker-token", &api.CreateWorkerTokenInput{Worker: args[0]})
			if err != nil {
				return err
			}
			return a.Emit(t, nil, func() {
				fmt.Fprintln(a.Stdout, t.Token)
				fmt.Fprintf(a.Stderr, "coffer: worker %s's token (PostgreSQL role %s): shown this once, store it now\n", t.Worker, t.Role)
			})
		}}, "create-worker-token"))
}

func (a *app) cmdWorkersTokenRevoke() *cobra.Command {
	return command.RemoteToo(command.Op(&cobra.Command{Use: "revoke NAME", Short: "revoke a worker's token: cut it off, re-admit its running units",
		Long: command.Manual(`Revoke worker NAME's token at once: its role may no longer log in and loses
the workers' grants (a session still open can do nothing more), its
sessions are ended, and its heartbeat is expired, so that the server
holding the schedules declares it lost at its next look and its running
units go back to the dispatcher. The worker process, refused its next
renewal, exits 1. coffer workers token create NAME gives it a new token.`,
			`"worker NAME's token revoked" with the sessions ended. --json: {worker, sessions, expired}.`,
			`coffer workers token revoke kvm7`,
			"0; 7 when the worker has no token; 2 for a SQLite catalog."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := command.RunOp[api.WorkerTokenRevoked](cmd.Context(), a.App, "revoke-worker-token", &api.RevokeWorkerTokenInput{Worker: args[0]})
			if err != nil {
				return err
			}
			return a.Emit(r, nil, func() {
				a.Printf("worker %s's token revoked (%d sessions ended)\n", r.Worker, r.Sessions)
			})
		}}, "revoke-worker-token"))
}
