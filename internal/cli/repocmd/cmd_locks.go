package repocmd

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

func (a *app) cmdLocks() *cobra.Command {
	return command.RemoteToo(command.Op(&cobra.Command{
		Use:   "locks",
		Short: "show who is working on the repository",
		Long: command.Manual(`List the leases on the repository: every backup, restore, verification and
maintenance run holds one while it works, refreshed periodically. A lease
whose holder crashed expires by itself (or is recognised at once when the
holder ran on this host and its process is gone); the next backup or
maintenance run removes it. Leases are not object locks: those are the
storage's, on backup points (`+"`--immutable-for`"+`).`,
			`A table: KIND, HOLDER (user@host pid), SINCE, EXPIRES, STATE, WHAT.
--json: a list of {kind, host, user, pid, description, since, expires,
alive} ([] when nobody works on the repository).`,
			`coffer locks
coffer locks --json | jq '.[] | select(.kind == "gc")'`,
			"0; 7 without a repository."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			leases, err := command.RunOp[[]api.Lease](cmd.Context(), a.App, "list-leases", &api.RepoParam{})
			if err != nil {
				return err
			}
			return a.Emit(leases, nil, func() {
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "KIND\tHOLDER\tSINCE\tEXPIRES\tSTATE\tWHAT")
				for _, l := range leases {
					state := "alive"
					if !l.Alive {
						state = "dead (removed by the next run)"
					}
					fmt.Fprintf(tw, "%s\t%s@%s pid %d\t%s\t%s\t%s\t%s\n", l.Kind, l.User, l.Host, l.PID,
						l.Since.Local().Format(time.DateTime), l.Expires.Local().Format(time.DateTime), state, l.Description)
				}
				_ = tw.Flush()
			})
		},
	}, "list-leases"))
}
