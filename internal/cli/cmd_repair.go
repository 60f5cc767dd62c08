package cli

import (
	"github.com/spf13/cobra"
)

func (a *app) cmdRepair() *cobra.Command {
	cmd := &cobra.Command{Use: "repair", Short: "repair repository metadata"}
	cmd.AddCommand(&cobra.Command{
		Use:   "index",
		Short: "rebuild the chunk index from the pack files",
		Long: `Rebuild the chunk index from the trailers of all packs (packs are
self-describing) and replace every existing index segment, damaged ones
included. Run it when verify reports a damaged index segment.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			r, err := a.openRepo(ctx)
			if err != nil {
				return err
			}
			rep, err := r.RebuildIndex(ctx)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(rep)
			}
			a.printf("indexed %d chunk(s) from %d pack(s), replaced %d segment(s)\n", rep.Chunks, rep.Packs, rep.Superseded)
			for _, u := range rep.Unreadable {
				a.printf("unreadable pack: %s\n", u)
			}
			return nil
		},
	})
	return cmd
}
