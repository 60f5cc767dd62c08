package repocmd

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

func (a *app) cmdCatalog() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "the catalog of jobs, tasks, events and backup points",
		Long: command.Manual(`The catalog records what coffer did (jobs, per-VM tasks, events) and the
backup points of its repositories, for fast listing without opening a
repository. It is a SQLite file by default (see `+"`coffer config keys`"+`, key
catalog) or a PostgreSQL database shared by several workers
(catalog: postgres://user@host/db). The repository stays the source of
truth: `+"`coffer catalog rebuild`"+` recreates its backup points from it.
Backups, forget and protect keep it in step; when they cannot reach it
they say so, and a rebuild mends it.`,
			"See the subcommands.",
			`coffer catalog points --vm web-1
coffer catalog rebuild`,
			"That of the subcommand."),
	}
	cmd.AddCommand(a.cmdCatalogRebuild(), a.cmdCatalogPoints(), a.cmdCatalogExport(), a.cmdCatalogExports(), a.cmdCatalogImport())
	return cmd
}

func (a *app) cmdCatalogRebuild() *cobra.Command {
	return command.Op(&cobra.Command{
		Use:   "rebuild",
		Short: "recreate the catalog's backup points from the repository",
		Long: command.Manual(`Read every snapshot manifest of the repository and replace the catalog's
backup points of that repository with them, in one transaction: points
forgotten since disappear, points the catalog missed appear. Points of
other repositories are left alone.

A damaged manifest is skipped and reported; the other points are still
recorded. If the repository cannot be listed completely (a storage
error), the catalog is left unchanged.`,
			`"catalog LOCATION: N backup point(s) of repository ID", skipped
manifests on stderr. --json: {repository, points, skipped: [{point_id,
error}]}.`,
			"coffer catalog rebuild",
			"0; 5 when damaged manifests were skipped (the others are recorded)."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := command.RunOp[*api.CatalogRebuild](cmd.Context(), a.App, "rebuild-catalog", &api.RepoParam{})
			if res == nil {
				return err
			}
			return a.Emit(res, err, func() {
				a.Printf("catalog %s: %d backup point(s) of repository %s\n", a.Opened().CatalogLocation(), res.Points, res.Repository)
				for _, s := range res.Skipped {
					fmt.Fprintf(a.Stderr, "coffer: skipped damaged snapshot %s: %s\n", command.Short(s.PointID), s.Error)
				}
			})
		},
	}, "rebuild-catalog")
}

func (a *app) cmdCatalogPoints() *cobra.Command {
	var in api.ListCatalogPointsInput
	var limit int
	cmd := &cobra.Command{
		Use:   "points",
		Short: "list the backup points recorded in the catalog, newest first",
		Long: command.Manual(`List backup points from the catalog alone, newest first, without opening
any repository. --vm matches a VM name or a VM ID.`,
			`A table: ID, TIME, VM, MODE, CONSISTENCY, DISKS, SIZE, STORED,
REPOSITORY, TAGS, then the count. --json: a list of backup point
documents, the same shape as `+"`snapshots --json`"+`; the catalog does not
record the disks, warnings or byte counts of reading, so those fields are
absent.`,
			`coffer catalog points
coffer catalog points --vm web-1 --limit 5 --json`,
			"0; 1 when the catalog cannot be opened."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			points, err := a.catalogPoints(cmd.Context(), in, limit)
			if err != nil {
				return err
			}
			return a.Emit(points, nil, func() {
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tTIME\tVM\tMODE\tCONSISTENCY\tDISKS\tSIZE\tSTORED\tREPOSITORY\tTAGS")
				for _, p := range points {
					prot := ""
					if p.Protected {
						prot = " (protected)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s%s\n", p.ShortID, p.Time.Local().Format(time.DateTime),
						p.VM, p.Mode, api.Consistency(p.SnapshotMode, p.SnapshotModeAchieved, p.Hooks), p.DiskCount, command.HumanBytes(p.LogicalBytes),
						command.HumanBytes(p.StoredBytes), command.Short(p.Repository), formatTags(p.Tags), prot)
				}
				_ = tw.Flush()
				a.Printf("%d backup point(s)\n", len(points))
			})
		},
	}
	cmd.Flags().StringVar(&in.VM, "vm", "", "only points of this VM (name or ID)")
	cmd.Flags().StringVar(&in.Repository, "repository-id", "", "only points of this repository (its ID)")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many points (0: all)")
	return command.RemoteToo(command.Op(cmd, "list-catalog-points"))
}

// catalogPoints reads the catalog's points a page at a time, up to limit
// (0: all).
func (a *app) catalogPoints(ctx context.Context, in api.ListCatalogPointsInput, limit int) ([]api.BackupPoint, error) {
	out := []api.BackupPoint{}
	for {
		in.Limit = command.MaxPage
		if limit > 0 {
			in.Limit = min(command.MaxPage, limit-len(out))
		}
		page, next, err := command.RunPage[[]api.BackupPoint](ctx, a.App, "list-catalog-points", &in)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if next == "" || (limit > 0 && len(out) >= limit) {
			return out, nil
		}
		in.After = next
	}
}
