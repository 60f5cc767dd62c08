package repocmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

func (a *app) cmdProtect() *cobra.Command {
	var in api.ProtectInput
	cmd := &cobra.Command{
		Use:   "protect SNAPSHOT...",
		Short: "protect backup points from forget (or --remove the protection)",
		Long: command.Manual(`Protect backup points (IDs, unique prefixes or "latest") from `+"`coffer forget`"+`
and from the retention of policies: a protected point is kept whatever the
keep rules say, until --remove releases it. The protection is recorded in
the point's manifest and in the catalog.

Protection is coffer's own rule; object lock (`+"`--immutable-for`"+`) is the
storage's, which nobody can lift before it ends.`,
			`"snapshot ID protected" (or "unprotected") per point. --json: a list of
{point_id, protected, catalog_warning}.`,
			`coffer protect 3fa2c1d0
coffer protect latest --remove`,
			"0; 7 for an unknown point."),
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Body.Points = args
			res, err := command.RunOp[[]api.ProtectResult](cmd.Context(), a.App, "protect", &in)
			if err != nil && len(res) == 0 {
				return err
			}
			return a.Emit(res, err, func() {
				for _, r := range res {
					state := "protected"
					if !r.Protected {
						state = "unprotected"
					}
					a.Printf("backup point %s %s\n", command.Short(r.PointID), state)
					if r.CatalogWarning != "" {
						fmt.Fprintf(a.Stderr, "coffer: warning: %s\n", r.CatalogWarning)
					}
				}
			})
		},
	}
	cmd.Flags().BoolVar(&in.Body.Remove, "remove", false, "remove the protection")
	return command.RemoteToo(command.Op(cmd, "protect"))
}
