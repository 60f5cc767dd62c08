package restorecmd

import (
	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/service"
)

func (a *app) cmdRestore() *cobra.Command {
	var in api.RestoreDiskInput
	cmd := &cobra.Command{
		Use:   "restore SNAPSHOT --to PATH",
		Short: "restore disks of a backup point to files or block devices",
		Long: command.Manual(`Restore the disks of a backup point (an ID, a unique ID prefix, or "latest").

With one disk (or --disk), PATH is the target file or block device. With
several disks, PATH is a directory that receives one file per disk. Files
are written sparse: holes are never written. A file is written under a
temporary name and renamed when complete; --resume continues an interrupted
restore of the same backup point instead of starting over. The restore
holds a lease on the repository, so garbage collection keeps the point's
data while it is read, even if the point is forgotten meanwhile.

--copies N makes N copies of each disk in all, for test copies: the disk
is restored once and the others are made from it beside the target
(web-copy2.raw, ...). The filesystem clones them where it can (XFS with
reflink=1, btrfs: shared extents, nothing passes through the host);
elsewhere they are copied with their holes kept. Each copy says which.
--no-offload turns the storage's part off: zeros are written rather than
left as holes or zeroed by the device, copies go through coffer. It is
for storage whose offload misbehaves, and shows what the offload saves.

Ranges a repair recorded as lost are zeros in the restored disk; they are
listed, and the restore ends with the partial-failure status.`,
			`One line per disk: what was written, the holes, the time and rate, and
the lost ranges if any. --json: a list of {point_id, disk, target,
format, size_bytes, written_bytes, zero_bytes, read_requests,
duration_seconds, resumed, lost_ranges: [{offset_bytes, length_bytes}],
copies: [{target, method, data_bytes}]}.`,
			`coffer restore 3fa2c1d0 --to /var/lib/images/web.raw
coffer restore latest --disk 1 --to /dev/vg0/restored
coffer restore latest --to /tmp/web --format qcow2
coffer restore latest --disk 0 --to /lab/web.raw --copies 4`,
			`0; 6 when ranges were lost to repository damage; 2 when the target
exists (without --overwrite or --resume); 7 for an unknown point; 9 when
the target is full (--resume continues).`),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Point = args[0]
			// Through a server, --to is a path under its restore directory.
			res, err := command.RunOp[[]api.RestoredDisk](cmd.Context(), a.App, "restore-disk", &in)
			if err == nil || service.Classify(err) == api.Partial {
				return a.Emit(res, err, func() { a.printRestored(res) })
			}
			a.printRestored(res) // the disks restored before the failure (not with --json: the error is the document)
			return err
		},
	}
	f, b := cmd.Flags(), &in.Body
	f.StringVar(&b.Disk, "disk", "", "restore only this disk (index, key or name)")
	f.StringVar(&b.To, "to", "", "target file, block device or directory (required)")
	f.BoolVar(&b.Overwrite, "overwrite", false, "replace an existing target file")
	f.BoolVar(&b.Resume, "resume", false, "continue an interrupted restore")
	f.BoolVar(&b.NoOffload, "no-offload", false, "write zeros and copy through the host even where the storage could (storage whose offload misbehaves)")
	f.IntVar(&b.Copies, "copies", 1, "copies of each disk in all: the restored one and copies cloned from it (NAME-copy2.EXT...)")
	f.StringVar(&b.Format, "format", "raw", "raw (sparse) or qcow2 (written by qemu-img from coffer's NBD server)")
	command.WorkerFlag(f, &in.WorkerParam)
	_ = cmd.MarkFlagRequired("to")
	cmd.AddCommand(a.cmdRestoreVM())
	return command.RemoteToo(command.Op(cmd, "restore-disk"))
}

// printRestored prints one line per restored disk (not with --json).
func (a *app) printRestored(res []api.RestoredDisk) {
	for _, r := range res {
		a.Printf("restored %s of backup point %s to %s: %s written, %s holes, %.1fs (%s)\n", r.Disk, command.Short(r.PointID), r.Target,
			command.HumanBytes(r.WrittenBytes), command.HumanBytes(r.ZeroBytes), r.DurationSeconds, command.Rate(r.SizeBytes, command.Seconds(r.DurationSeconds)))
		for _, c := range r.Copies {
			a.Printf("  copy %s: %s %s\n", c.Target, c.Method, command.HumanBytes(c.DataBytes))
		}
		if len(r.LostRanges) > 0 {
			a.Printf("  %d range(s) of %s were lost to repository damage (recorded by `coffer repair snapshots`) and are zeros in the restored disk:\n", len(r.LostRanges), r.Disk)
			for j, e := range r.LostRanges {
				if j == 20 {
					a.Printf("    and %d more\n", len(r.LostRanges)-j)
					break
				}
				a.Printf("    offset %d, %s\n", e.OffsetBytes, command.HumanBytes(e.LengthBytes))
			}
		}
	}
}
