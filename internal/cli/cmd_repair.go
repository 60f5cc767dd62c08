package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/store"
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
	cmd.AddCommand(&cobra.Command{
		Use:   "undelete",
		Short: "make locked objects hidden by deletes or rewrites current again (Object Lock buckets)",
		Long: `On a bucket with Object Lock a lock protects one version of an object:
someone allowed to delete can still hide it behind a delete marker, or stack
an unlocked version on top, and coffer then finds the repository (config,
keys, backup points) gone or damaged. For every object of the repository
this removes what sits above its newest locked version (and delete markers
above any object's newest version), which makes the locked data current
again. It needs no password and deletes only what hides a version.

After an attack that deleted everything it could, the immutable points come
back with:

    coffer repair undelete     # the config, keys, points and packs reappear
    coffer repair index        # the index was not locked: rebuild it from the packs
    coffer restore POINT --to FILE`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			st, err := a.openStore(ctx, a.res.String("repository"))
			if err != nil {
				return err
			}
			defer st.Close()
			vs, ok := st.(store.Versioned)
			if !ok {
				return usagef("%s keeps no versions of objects: there is nothing hidden to bring back", st.Properties().Location)
			}
			rep, err := store.Unhide(ctx, vs, "", time.Now())
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(rep)
			}
			a.printf("made %d object(s) current again: removed %d delete marker(s) and %d unlocked version(s) on top\n", rep.Objects, rep.Markers, rep.Versions)
			if rep.Objects > 0 {
				a.printf("next: coffer repair index (rebuilds the index from the packs), then coffer verify\n")
			}
			return nil
		},
	})
	return cmd
}
