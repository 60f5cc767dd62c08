package cli

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/catalog/rebuild"
	"github.com/coffer-backup/coffer/internal/config"
)

// catalogLocation resolves the `catalog` setting. Unset, it is the SQLite
// file catalog.db in the state directory: state-dir when one is
// configured, else the platform default (catalogopen.DefaultLocation).
func (a *app) catalogLocation() string {
	if loc := a.res.String("catalog"); loc != "" {
		return config.ExpandHome(loc)
	}
	if dir, src := a.res.Get("state-dir"); src != config.FromDefault && dir != "" {
		return filepath.Join(config.ExpandHome(dir), "catalog.db")
	}
	return catalogopen.DefaultLocation()
}

func (a *app) openCatalog(ctx context.Context) (catalog.Catalog, error) {
	loc := a.catalogLocation()
	c, err := catalogopen.Open(ctx, loc)
	if err != nil {
		return nil, fmt.Errorf("open catalog %s: %w", catalogopen.Redact(loc), err)
	}
	return c, nil
}

func (a *app) cmdCatalog() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "the catalog of jobs, tasks, events and backup points",
		Long: `The catalog records what coffer did (jobs, per-VM tasks, events) and the
backup points of its repositories, for fast listing without opening a
repository. It is a SQLite file by default (see ` + "`coffer config keys`" + `, key
catalog) or a PostgreSQL database shared by several workers
(catalog: postgres://user@host/db). The repository stays the source of
truth: ` + "`coffer catalog rebuild`" + ` recreates its backup points from it.`,
	}
	cmd.AddCommand(a.cmdCatalogRebuild(), a.cmdCatalogPoints())
	return cmd
}

func (a *app) cmdCatalogRebuild() *cobra.Command {
	return &cobra.Command{
		Use:   "rebuild",
		Short: "recreate the catalog's backup points from the repository",
		Long: `Read every snapshot manifest of the repository and replace the catalog's
backup points of that repository with them, in one transaction: points
forgotten since disappear, points the catalog missed appear. Points of
other repositories are left alone.

A damaged manifest is skipped and reported (exit status 5); the other
points are still recorded. If the repository cannot be listed completely
(a storage error), the catalog is left unchanged.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			r, err := a.openRepo(ctx)
			if err != nil {
				return err
			}
			c, err := a.openCatalog(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			res, err := rebuild.Rebuild(ctx, c, r)
			if err != nil {
				return err
			}
			if a.jsonOut {
				if err := a.printJSON(res); err != nil {
					return err
				}
			} else {
				a.printf("catalog %s: %d backup point(s) of repository %s\n",
					catalogopen.Redact(a.catalogLocation()), res.Points, res.Repository)
				for _, s := range res.Skipped {
					fmt.Fprintf(a.stderr, "coffer: skipped damaged snapshot %s: %s\n", s.ID[:8], s.Err)
				}
			}
			if len(res.Skipped) > 0 {
				return integrityError{msg: fmt.Sprintf("%d damaged snapshot manifest(s) skipped", len(res.Skipped))}
			}
			return nil
		},
	}
}

// pointView is the --json form of a catalog backup point.
type pointView struct {
	Repository   string            `json:"repository"`
	ID           string            `json:"id"`
	Time         time.Time         `json:"time"`
	Connection   string            `json:"connection,omitempty"`
	VMID         string            `json:"vm_id,omitempty"`
	VMName       string            `json:"vm_name"`
	Mode         string            `json:"mode"`
	Parent       string            `json:"parent,omitempty"`
	Disks        int               `json:"disks"`
	BytesLogical int64             `json:"bytes_logical"`
	BytesStored  int64             `json:"bytes_stored"`
	Tags         map[string]string `json:"tags,omitempty"`
	Protected    bool              `json:"protected"`
	JobID        int64             `json:"job_id,omitempty"`
	// As in snapshotView: requested, and achieved ("unknown" when the
	// manifest did not record it).
	SnapshotMode         string `json:"snapshot_mode,omitempty"`
	SnapshotModeAchieved string `json:"snapshot_mode_achieved"`
}

func (a *app) cmdCatalogPoints() *cobra.Command {
	var (
		vm, repository string
		limit          int
	)
	cmd := &cobra.Command{
		Use:   "points",
		Short: "list the backup points recorded in the catalog, newest first",
		Long: `List backup points from the catalog alone, newest first, without opening
any repository. --vm matches a VM name or a VM ID.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, err := a.openCatalog(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			points, err := listPoints(ctx, c, catalog.BackupPointFilter{Repository: repository, Limit: limit}, vm)
			if err != nil {
				return err
			}
			if a.jsonOut {
				views := make([]pointView, 0, len(points))
				for _, p := range points {
					v := pointView(p)
					v.SnapshotModeAchieved = achievedMode(v.SnapshotModeAchieved)
					views = append(views, v)
				}
				return a.printJSON(views)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTIME\tVM\tMODE\tCONSISTENCY\tDISKS\tSIZE\tSTORED\tREPOSITORY\tTAGS")
			for _, p := range points {
				prot := ""
				if p.Protected {
					prot = " (protected)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s%s\n", short(p.ID), p.Time.Local().Format(time.DateTime),
					p.VMName, p.Mode, consistency(p.SnapshotMode, p.SnapshotModeAchieved), p.Disks, humanBytes(p.BytesLogical),
					humanBytes(p.BytesStored), short(p.Repository), formatTags(p.Tags), prot)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			a.printf("%d backup point(s)\n", len(points))
			return nil
		},
	}
	cmd.Flags().StringVar(&vm, "vm", "", "only points of this VM (name or ID)")
	cmd.Flags().StringVar(&repository, "repository-id", "", "only points of this repository (its ID)")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many points (0: all)")
	return cmd
}

// listPoints applies the filter, with vm matching a name or an ID.
func listPoints(ctx context.Context, c catalog.Catalog, f catalog.BackupPointFilter, vm string) ([]catalog.BackupPoint, error) {
	if vm == "" {
		return c.ListBackupPoints(ctx, f)
	}
	byName, byID := f, f
	byName.VMName, byID.VMID = vm, vm
	a, err := c.ListBackupPoints(ctx, byName)
	if err != nil {
		return nil, err
	}
	b, err := c.ListBackupPoints(ctx, byID)
	if err != nil {
		return nil, err
	}
	all := append(a, b...)
	slices.SortFunc(all, func(x, y catalog.BackupPoint) int {
		return cmp.Or(y.Time.Compare(x.Time), cmp.Compare(y.ID, x.ID), cmp.Compare(x.Repository, y.Repository))
	})
	all = slices.CompactFunc(all, func(x, y catalog.BackupPoint) bool { return x.Repository == y.Repository && x.ID == y.ID })
	if f.Limit > 0 && len(all) > f.Limit {
		all = all[:f.Limit]
	}
	return all, nil
}

func short(s string) string {
	if len(s) > 8 {
		return s[:8]
	}
	return s
}
