package repocmd

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/service/repoops"
)

func (a *app) cmdSnapshots() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:     "snapshots",
		Aliases: []string{"ls"},
		Short:   "list backup points",
		Long: command.Manual(`List the backup points of the repository, oldest first, straight from the
repository (no catalog needed). A damaged manifest is reported and skipped.

CONSISTENCY is the VM snapshot mode the point really holds, with the
requested one beside it when the connector fell back: "crash-consistent
(quiesced requested)" after a quiesce fallback. Points written before
coffer recorded it show "unknown"; disk images read without a snapshot
show "as-is".

DAMAGE says what a point lacks: chunks verify found lost (until a new
backup of the source stores them again, which mends every point that uses
them), or spans a repair recorded as lost.

BOOT is the point's last boot verification (`+"`coffer verify boot`"+`): "ok", or
"failed@N" with the ladder step that failed; "-" when never verified.`,
			`A table: ID, TIME, SOURCE, MODE, CONSISTENCY, DISKS, SIZE, NEW, DAMAGE,
BOOT, TAGS, then the count. Damaged manifests are named on stderr. Below,
when policies keep storage snapshots of these VMs (keep-storage-snapshots),
a second table lists them as restore points of MODE storage (see `+"`coffer storage-snapshots`"+`).
--json: a list of backup point documents ([] when there is none), the
same shape as `+"`catalog points --json`"+` and `+"`backup --json`"+`:
id, short_id, repository, time, vm, vm_id, connection, source_kind, host,
mode, snapshot_mode, snapshot_mode_achieved, parent, tags, protected,
locked_until, job_id, disk_count, logical_bytes, stored_bytes, read_bytes,
new_bytes, duration_seconds, disks, warnings, damage, boot_verification
({passed, failed_step, time}).`,
			`coffer snapshots
coffer snapshots --name web-1 --json | jq -r '.[-1].id'`,
			"0 with the list (also when damaged manifests were skipped); 7 without a repository."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			points, skipped, err := callPoints(a, cmd, name)
			if err != nil {
				return err
			}
			return a.Emit(points, nil, func() {
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tTIME\tSOURCE\tMODE\tCONSISTENCY\tDISKS\tSIZE\tNEW\tDAMAGE\tBOOT\tTAGS")
				for _, p := range points {
					prot := ""
					if p.Protected {
						prot = " (protected)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s%s\n", p.ShortID, p.Time.Local().Format("2006-01-02 15:04:05"),
						p.VM, p.Mode, api.Consistency(p.SnapshotMode, p.SnapshotModeAchieved, p.Hooks), p.DiskCount, command.HumanBytes(p.LogicalBytes),
						command.HumanBytes(p.StoredBytes), command.Dash(p.Damage), bootColumn(p.BootVerification), formatTags(p.Tags), prot)
				}
				_ = tw.Flush()
				a.Printf("%d backup point(s)\n", len(points))
				for _, b := range skipped {
					fmt.Fprintf(a.Stderr, "coffer: skipped damaged snapshot %s: %s\n", command.Short(b.PointID), b.Error)
				}
				a.printKeptStorage(cmd, name)
			})
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "only snapshots of this source name")
	return command.RemoteToo(command.Op(cmd, "list-points", "list-storage-snapshots"))
}

// printKeptStorage lists, below the repository's points, the storage
// snapshots policies keep of the same VMs: restore points too, restored
// with `coffer storage-snapshots restore`. A caller who may not see them
// (a server's access control) just does not get the section.
func (a *app) printKeptStorage(cmd *cobra.Command, vm string) {
	kept, err := command.RunOp[[]api.StorageSnapshot](cmd.Context(), a.App, "list-storage-snapshots", &api.ListStorageSnapshotsInput{VM: vm})
	if err != nil || len(kept) == 0 {
		return
	}
	a.Printf("\nStorage snapshots kept on the datastores (coffer storage-snapshots restore LABEL --vm NAME --target DIR):\n")
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LABEL\tTIME\tSOURCE\tMODE\tCONSISTENCY\tDISKS\tPOLICY")
	for _, k := range kept {
		for _, v := range k.VMs {
			if vm != "" && v.VM != vm && v.VMID != vm {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\tstorage\t%s\t%d\t%s\n", k.Label, k.Time.Local().Format("2006-01-02 15:04:05"), v.VM, k.SnapshotMode, len(v.Disks), k.Policy)
		}
	}
	_ = tw.Flush()
}

// callPoints lists the repository's points: in this process with the
// manifests it skipped, which the server's listing does not name.
func callPoints(a *app, cmd *cobra.Command, name string) ([]api.BackupPoint, []api.SkippedPoint, error) {
	in := api.ListPointsInput{VM: name}
	if a.Remote != nil {
		points, err := command.RunOp[[]api.BackupPoint](cmd.Context(), a.App, "list-points", &in)
		return points, nil, err
	}
	svc, err := a.Service()
	if err != nil {
		return nil, nil, err
	}
	return repoops.Ops{Service: svc}.RepositoryPoints(cmd.Context(), &in)
}

func formatTags(t map[string]string) string {
	var parts []string
	for k, v := range t {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// bootColumn is a point's last boot verification in one word.
func bootColumn(b *api.BootSummary) string {
	switch {
	case b == nil:
		return "-"
	case b.Passed:
		return "ok"
	case b.CannotVerify != "":
		return "unverifiable"
	}
	return fmt.Sprintf("failed@%d", b.FailedStep)
}
