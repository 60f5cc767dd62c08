package cli

import (
	"github.com/spf13/cobra"
)

func (a *app) cmdProtect() *cobra.Command {
	var unprotect bool
	cmd := &cobra.Command{
		Use:   "protect SNAPSHOT...",
		Short: "protect backup points from forget (or --remove the protection)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			r, err := a.openRepo(ctx)
			if err != nil {
				return err
			}
			for _, ref := range args {
				s, err := r.FindSnapshot(ctx, ref)
				if err != nil {
					return err
				}
				s.Protected = !unprotect
				if err := r.UpdateSnapshot(ctx, s); err != nil {
					return err
				}
				state := "protected"
				if unprotect {
					state = "unprotected"
				}
				a.printf("snapshot %s %s\n", s.ID.Short(), state)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&unprotect, "remove", false, "remove the protection")
	return cmd
}
