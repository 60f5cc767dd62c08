package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) cmdLocks() *cobra.Command {
	return &cobra.Command{
		Use:   "locks",
		Short: "show who is working on the repository",
		Long: `List the leases on the repository: every backup, restore, verification and
maintenance run holds one while it works, refreshed periodically. A lease
whose holder crashed expires by itself (or is recognised at once when the
holder ran on this host and its process is gone); the next backup or
maintenance run removes it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			r, err := a.openRepo(ctx)
			if err != nil {
				return err
			}
			leases, err := r.Leases(ctx)
			if err != nil {
				return err
			}
			host := hostname()
			if a.jsonOut {
				type view struct {
					Kind, Host, User, Description string
					PID                           int
					Since, Expires                time.Time
					Alive                         bool
				}
				var out []view
				for _, l := range leases {
					out = append(out, view{l.Kind, l.Host, l.User, l.Description, l.PID, l.Created, l.Expires, !l.Dead(time.Now(), host)})
				}
				return a.printJSON(out)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "KIND\tHOLDER\tSINCE\tEXPIRES\tSTATE\tWHAT")
			for _, l := range leases {
				state := "alive"
				if l.Dead(time.Now(), host) {
					state = "dead (removed by the next run)"
				}
				fmt.Fprintf(tw, "%s\t%s@%s pid %d\t%s\t%s\t%s\t%s\n", l.Kind, l.User, l.Host, l.PID,
					l.Created.Local().Format(time.DateTime), l.Expires.Local().Format(time.DateTime), state, l.Description)
			}
			return tw.Flush()
		},
	}
}
