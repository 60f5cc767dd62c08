package restorecmd

import (
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

func (a *app) cmdStorageSnapshots() *cobra.Command {
	var in api.ListStorageSnapshotsInput
	cmd := &cobra.Command{
		Use:   "storage-snapshots",
		Short: "list the storage snapshots policies keep as restore points",
		Long: command.Manual(`List the storage snapshots that policies with keep-storage-snapshots keep on
their datastores, oldest first: restore points beside the repository's
(Zero Downtime Backup). Each holds the disk files of the VMs one group run
read, as they were at the run's instant; `+"`coffer storage-snapshots restore`"+`
clones them back in seconds, without reading the repository. The
repository's point of the same run is the copy that survives the loss of
the storage. A policy keeps the newest N of each datastore, N as its
keep-storage-snapshots says at the time: each run deletes the older ones
(all of them once N is 0 or the setting is removed). A snapshot whose
policy is gone from the configuration (or no longer runs on its
connection, or whose connection has no storage-snapshots provider any
more) is marked orphaned: no run deletes it, `+"`coffer storage-snapshots forget`"+`
does.`,
			`A table: LABEL, TIME, POLICY (with "(orphaned)"), DATASTORE, KIND, MODE,
VMS, then a line per orphaned snapshot saying why and how to delete it.
--json: a list of {label, policy, connection, datastore, provider, kind,
time, job_id, snapshot_mode, vms: [{vm, vm_id, disks}], orphaned (the
reason, only when orphaned)} ([] when none is kept).`,
			`coffer storage-snapshots
coffer storage-snapshots --vm web-1 --json | jq -r '.[-1].label'`,
			"0 with the list."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kept, err := command.RunOp[[]api.StorageSnapshot](cmd.Context(), a.App, "list-storage-snapshots", &in)
			if err != nil {
				return err
			}
			return a.Emit(kept, nil, func() {
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "LABEL\tTIME\tPOLICY\tDATASTORE\tKIND\tMODE\tVMS")
				var orphans []string
				for _, k := range kept {
					var vms []string
					for _, v := range k.VMs {
						vms = append(vms, v.VM)
					}
					pol := k.Policy
					if k.Orphaned != "" {
						pol += " (orphaned)"
						orphans = append(orphans, k.Label+": "+k.Orphaned)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.Label, k.Time.Local().Format(time.DateTime), pol, k.Datastore,
						k.Kind, k.SnapshotMode, strings.Join(vms, ","))
				}
				_ = tw.Flush()
				a.Printf("%d storage snapshot(s) kept\n", len(kept))
				for _, o := range orphans {
					a.Printf("orphaned %s\n", o)
				}
			})
		},
	}
	cmd.Flags().StringVar(&in.Policy, "policy", "", "only this policy's")
	cmd.Flags().StringVar(&in.VM, "vm", "", "only those holding this VM (name or ID)")
	cmd.AddCommand(a.cmdStorageRestore(), a.cmdStorageForget(), a.cmdStorageShip())
	return command.RemoteToo(command.Op(cmd, "list-storage-snapshots"))
}

func (a *app) cmdStorageRestore() *cobra.Command {
	var in api.RestoreStorageSnapshotInput
	cmd := &cobra.Command{
		Use:   "restore LABEL --vm NAME (--target DIR | --onto-original --yes-overwrite-original)",
		Short: "restore a VM's disk files from a kept storage snapshot, by cloning",
		Long: command.Manual(`Make the disk files of one VM again, as they are in the kept storage snapshot
LABEL, in the directory --target (each named as the original file). Where
the target is on the datastore's filesystem (XFS with reflink=1, btrfs)
each file is a clone: no data passes through the host and a disk of any
size is back in seconds. Elsewhere the kernel copies it (copy_file_range),
holes kept. The snapshot itself is never handed out: writing to a restored
disk cannot change it. An existing file is refused without --overwrite.
Through a server (--server), --target is relative to its restore
directory.

--onto-original --yes-overwrite-original puts the disks back where they
were instead: each production disk file is replaced, in one rename, by a
clone of the snapshot's, so the VM runs on the clones (the snapshot stays
as it is). The VM must be shut off: a disk file a running QEMU holds
(its image locks) is refused, and every disk is checked before any is
replaced. The files keep their owner and mode.

--from DIR restores from the snapshot's copy that `+"`coffer storage-snapshots ship`"+`
sent to DIR, a storage-snapshots provider's ship-to (at the DR site, where
the copy's filesystem is mounted), into --target.`,
			`One line per disk: the target, how it was made (cloned, kernel-copied,
copied) and its data bytes. --json: {label, vm, disks: [{disk, source,
target, method, data_bytes, seconds}]}.`,
			`coffer storage-snapshots restore coffer-job12-srv_vms-5551 --vm web-1 --target /srv/vms/restored
coffer storage-snapshots restore coffer-job12-srv_vms-5551 --vm web-1 --onto-original --yes-overwrite-original`,
			"0 when every disk is restored; 2 when a target exists, a disk is in use or the confirmation is missing; 7 for an unknown label or VM; 9 when the target filesystem is full."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Label = args[0]
			// Here, --target is a directory of this host; through a server,
			// one relative to its restore directory.
			if a.Remote == nil && in.Body.To != "" {
				abs, err := filepath.Abs(in.Body.To)
				if err != nil {
					return err
				}
				in.Body.To = abs
			}
			res, err := command.RunOp[*api.StorageRestore](cmd.Context(), a.App, "restore-storage-snapshot", &in)
			if err != nil {
				return err
			}
			return a.Emit(res, nil, func() {
				for _, d := range res.Disks {
					a.Printf("%s: %s, %s of data (%s)\n", d.Target, d.Method, command.HumanBytes(d.DataBytes), d.Disk)
				}
			})
		},
	}
	b := &in.Body
	cmd.Flags().StringVar(&b.VM, "vm", "", "the VM to restore (name or ID)")
	cmd.Flags().StringVar(&b.To, "target", "", "the directory to make the disk files in")
	cmd.Flags().BoolVar(&b.Overwrite, "overwrite", false, "replace disk files that exist there")
	cmd.Flags().BoolVar(&b.NoOffload, "no-offload", false, "copy through coffer even where the filesystem could clone")
	cmd.Flags().BoolVar(&b.OntoOriginal, "onto-original", false, "replace the shut-off VM's own disk files instead (the VM then runs on clones)")
	cmd.Flags().BoolVar(&b.ConfirmOverwrite, "yes-overwrite-original", false, "confirm --onto-original")
	cmd.Flags().StringVar(&b.From, "from", "", "restore from the copy shipped to this ship-to directory (at the DR site)")
	_ = cmd.MarkFlagRequired("vm")
	return command.RemoteToo(command.Op(cmd, "restore-storage-snapshot"))
}

func (a *app) cmdStorageForget() *cobra.Command {
	return command.RemoteToo(command.Op(&cobra.Command{
		Use:   "forget LABEL",
		Short: "delete a kept storage snapshot now",
		Long: command.Manual(`Delete the kept storage snapshot LABEL before its policy's retention would
(to free the datastore's space). The repository's points are untouched. A
deletion interrupted by a crash is finished at the next start.`,
			`The deleted snapshot; --json: its document (as in the list).`,
			`coffer storage-snapshots forget coffer-job12-srv_vms-5551`,
			"0 when deleted; 7 for an unknown label."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := command.RunOp[*api.StorageSnapshot](cmd.Context(), a.App, "forget-storage-snapshot",
				&api.ForgetStorageSnapshotInput{LabelParam: api.LabelParam{Label: args[0]}})
			if err != nil {
				return err
			}
			return a.Emit(k, nil, func() { a.Printf("deleted storage snapshot %s of policy %s (%s)\n", k.Label, k.Policy, k.Datastore) })
		},
	}, "forget-storage-snapshot"))
}

func (a *app) cmdStorageShip() *cobra.Command {
	var in api.ShipStorageSnapshotsInput
	cmd := &cobra.Command{
		Use:   "ship [--provider NAME]",
		Short: "send kept btrfs or reflink storage snapshots to the DR site (ship-to)",
		Long: command.Manual(`Send every kept snapshot of a btrfs storage-snapshots provider that has a
ship-to, and that is not there yet, to that directory (a second btrfs
filesystem, the DR site's) with btrfs send and btrfs receive: oldest first
per datastore, each against the one shipped before it, so only the change
crosses. A copy counts once btrfs receive has finished and its record is
written; a shipment killed half-way leaves an unrecorded subvolume that the
next shipment deletes before sending the snapshot again. A reflink
provider's snapshots go to a directory on a second filesystem that clones
files (XFS with reflink=1): the first whole, each later one as a clone of
the copy before it with only the changed extents written.
`+"`coffer storage-snapshots restore LABEL --from DIR`"+` restores a VM from a copy.`,
			`One line per snapshot sent: its label, whole or against which, the
stream's bytes (reflink: the bytes written) and time. --json: {shipped: [{label, provider, datastore,
to, parent, bytes, seconds}]}.`,
			`coffer storage-snapshots ship
coffer storage-snapshots ship --provider sub --json`,
			"0 when every snapshot is shipped (or none was new); 2 when no provider has a ship-to."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := command.RunOp[*api.StorageShipment](cmd.Context(), a.App, "ship-storage-snapshots", &in)
			if res != nil && err == nil {
				return a.Emit(res, nil, func() {
					for _, s := range res.Shipped {
						against := "whole"
						if s.Parent != "" {
							against = "against " + s.Parent
						}
						a.Printf("%s -> %s: %s, %s in %.1fs\n", s.Label, s.To, against, command.HumanBytes(s.Bytes), s.Seconds)
					}
					if len(res.Shipped) == 0 {
						a.Printf("nothing new to ship\n")
					}
				})
			}
			return err
		},
	}
	cmd.Flags().StringVar(&in.Provider, "provider", "", "only this storage-snapshots provider's snapshots")
	return command.RemoteToo(command.Op(cmd, "ship-storage-snapshots"))
}
